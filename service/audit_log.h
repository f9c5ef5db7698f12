// AuditLog: one JSON line for each call an operator must be able to account
// for: every SetFloor and DeleteCollection, and every request refused by
// the authorization policy or the last_max guard rail.
//
//   {"time":"2026-11-24T02:00:00.123456Z","identity":"cn:ops",
//    "peer":"ipv4:10.0.0.7:51234","method":"SetFloor",
//    "collection":"orders","request":{"floor":1000},
//    "code":"OK","message":""}
//
// (one line in the file). Lines go to stderr, or are appended to a file
// opened once; a failed write is reported on stderr once (again only after
// a write worked in between) and never stops the server. Rotate the file with
// copytruncate (the file is opened with O_APPEND, so writes land at its new
// end).
//
// Thread-safe.
#ifndef HILO_SERVICE_AUDIT_LOG_H_
#define HILO_SERVICE_AUDIT_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"
#include "service/clock.h"

namespace hilo {

// One audited call.
struct AuditRecord {
  std::string identity;
  std::string peer;
  std::string method;
  std::string collection;  // "" for ListCollections
  // The numbers the request asked for, by field name, in this order.
  std::vector<std::pair<std::string, int64_t>> request;
  absl::Status outcome;
};

// `text` as a JSON string literal, quotes included. Valid UTF-8 stays as it
// is, except '"', '\\' and control characters (escaped); each byte of an
// invalid sequence becomes U+FFFD, so the line is always valid JSON.
std::string JsonString(absl::string_view text);

// The record as one JSON object (no newline), stamped with `time`.
std::string AuditJson(const AuditRecord& record, absl::Time time);

class AuditLog {
 public:
  // Lines to stderr.
  explicit AuditLog(const Clock* clock);
  // Lines appended to `path`; INVALID_ARGUMENT naming it if it cannot be
  // opened. `clock` must outlive the log.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path,
                                                        const Clock* clock);
  ~AuditLog();

  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  void Write(const AuditRecord& record);

 private:
  AuditLog(const Clock* clock, std::FILE* file, std::string path);

  const Clock* const clock_;
  base::Mutex mu_;
  std::FILE* const file_;  // stderr, or owned
  const std::string path_;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hilo

#endif  // HILO_SERVICE_AUDIT_LOG_H_
