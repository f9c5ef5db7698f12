// A real PostgreSQL for the tests (testing/temp_postgres.sh): the
// one CTest starts for the whole run (fixture "postgresql", found through
// $HILO_TEST_POSTGRES_DIR), or, for a test binary run by hand or a test that
// stops and restarts its database, one of its own.
#ifndef HILO_TESTING_POSTGRES_INSTANCE_H_
#define HILO_TESTING_POSTGRES_INSTANCE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testing/test_util.h"

namespace hilo::testing_util {

class PostgresInstance {
 public:
  // The run's shared instance, started on first use if CTest did not start
  // one; lives until the process exits. Never stop or restart it.
  static absl::StatusOr<PostgresInstance*> Shared();
  // A new instance of the caller's own, removed when destroyed.
  static absl::StatusOr<std::unique_ptr<PostgresInstance>> Start();
  ~PostgresInstance();

  PostgresInstance(const PostgresInstance&) = delete;
  PostgresInstance& operator=(const PostgresInstance&) = delete;

  // The superuser's URI for database "postgres".
  const std::string& uri() const { return uri_; }
  // A new, empty schema and a URI whose search_path is it: a database of
  // one's own, at the cost of a CREATE SCHEMA.
  absl::StatusOr<std::string> NewSchema();
  // Runs `sql` on `uri` (text protocol; several statements allowed). With
  // `first`: the first column of the last statement's first row, as text
  // ("" if it has none).
  static absl::Status Execute(const std::string& uri, const std::string& sql,
                              std::string* first = nullptr);

  // Stops the server: "fast" (sessions end cleanly) or "immediate" (as a
  // crash: no checkpoint). Then Restart brings it back on the same port.
  absl::Status Stop(const std::string& mode);
  absl::Status Restart();

 private:
  // `owned`: destroyed with this object.
  PostgresInstance(std::string dir, std::unique_ptr<TempDir> scratch,
                   bool owned);
  absl::Status Script(const std::string& command, const std::string& mode,
                      std::string* out);

  const std::string dir_;
  std::unique_ptr<TempDir> scratch_;  // holds dir_ when owned
  const bool owned_;
  std::string uri_;
};

// A session of its own that runs `sql` in a transaction it keeps open until
// it is destroyed (then the session ends): a server frozen inside its
// transaction, holding whatever `sql` locked.
class OpenTransaction {
 public:
  static absl::StatusOr<std::unique_ptr<OpenTransaction>> Begin(
      const std::string& uri, const std::string& sql);
  ~OpenTransaction();

  OpenTransaction(const OpenTransaction&) = delete;
  OpenTransaction& operator=(const OpenTransaction&) = delete;

 private:
  explicit OpenTransaction(void* conn) : conn_(conn) {}
  void* const conn_;  // PGconn, kept out of the header
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_POSTGRES_INSTANCE_H_
