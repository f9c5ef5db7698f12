// PostgresSession: a libpq session of a test's own, outside any store, for
// setting a database up, holding its locks and reading what it stores.
//
//   PostgresSession session(uri);
//   EXPECT_EQ(session.Query("SELECT max FROM hilo_collections"), "32");
//
// Not thread-safe: one thread at a time.
#ifndef HILO_TESTING_POSTGRES_SESSION_H_
#define HILO_TESTING_POSTGRES_SESSION_H_

#include <libpq-fe.h>

#include <string>

#include "gtest/gtest.h"

namespace hilo::testing_util {

class PostgresSession {
 public:
  explicit PostgresSession(const std::string& uri)
      : conn_(PQconnectdb(uri.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
  }
  ~PostgresSession() { PQfinish(conn_); }
  // The first column of the first row, or "" (and a test failure).
  std::string Query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType s = PQresultStatus(r);
    std::string value;
    if (s == PGRES_TUPLES_OK && PQntuples(r) > 0) {
      value = PQgetvalue(r, 0, 0);
    } else if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(r);
    }
    PQclear(r);
    return value;
  }

 private:
  PGconn* const conn_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_POSTGRES_SESSION_H_
