// AuditLog: one JSON line for each call an operator must be able to account
// for: every SetFloor and DeleteCollection, and every request refused by
// the authorization policy or the last_max guard rail.
//
//   {"time":"2026-11-24T02:00:00.123456Z","identity":"cn:ops",
//    "peer":"ipv4:10.0.0.7:51234","method":"SetFloor",
//    "collection":"orders","request":{"floor":1000},
//    "code":"OK","message":""}
//
// (one line in the file). Administrative calls that passed authorization
// (Write) are always written. Refused calls (WriteRefusal) cost a client
// nothing to send, so a flood of them could fill the disk, or hide the
// refusals that matter among junk. They are limited per caller, in seconds
// (a second starts with the first line at least a second after the last
// one started):
//
//  - each authenticated identity (a certificate's, or a known token's) has
//    `refusals_per_second` lines of its own, whatever anyone else sends:
//    its refusals are always written, up to that many a second;
//  - an anonymous caller (identity "anonymous", an unknown token's too) is
//    counted by its peer address (the port dropped), with
//    `refusals_per_second` lines for each address and
//    `anonymous_refusals_per_second` lines for all of them together, so
//    callers without credentials write a bounded amount whatever their
//    number.
//
// The rest are counted, and the count is written as one summary line, in
// the same file, just before the first line of a later second (or at
// Flush, which the destructor calls):
//
//   {"time":"2026-11-24T02:00:01.200000Z",
//    "suppressed":{"count":5120,"first":"2026-11-24T02:00:00.003000Z",
//    "last":"2026-11-24T02:00:00.998000Z",
//    "by_method":{"NextRange":5000,"SetFloor":120},
//    "by_code":{"PERMISSION_DENIED":5120},
//    "top_callers":{"anonymous ipv4:10.0.0.9":5000,"token:lowpriv":120},
//    "top_collections":{"orders":5000,"payments":120}}}
//
// A pipeline tells a summary from a call by its "suppressed" key (a call
// has "method" instead); "first" and "last" are the times of the first and
// the last refusal it counts, and the by_ maps (keys sorted) add up to
// "count". top_callers (identities, and "anonymous ADDRESS") and
// top_collections name the kMaxSummaryTop most counted, most first; a
// summary tracks its first kMaxSummaryKeys callers and collections, and
// counts later ones only in "count". Lines go to stderr (StderrLines()), or
// are appended to a file opened once (owner-only if it creates it); a
// failed write is reported on stderr once (again only after a write worked
// in between) and never stops the server. Rotate the file with copytruncate
// (the file is opened with O_APPEND, so writes land at its new end).
//
// No caller waits for the file or for stderr's reader: a LineWriter thread
// writes the lines, from a queue of at most `max_queued_bytes`. A line that
// finds the queue full is dropped and counted (`on_line_dropped`, with a
// file; StderrLines()' listeners, on stderr), and once the writer has
// caught up one line says how many: in a file
//
//   {"time":"2026-11-24T02:00:09.000000Z","dropped":{"count":120}}
//
// (its time is the wall clock's when it is written).
//
// Thread-safe.
#ifndef HILO_SERVICE_ACCESS_AUDIT_LOG_H_
#define HILO_SERVICE_ACCESS_AUDIT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/access/line_writer.h"

namespace hilo {

// The caller a refusal's budget belongs to: `identity`, or for "anonymous"
// "anonymous ADDRESS", the peer's address without its port
// ("anonymous ipv4:10.0.0.9", "anonymous ipv6:[::1]").
std::string AuditCaller(absl::string_view identity, absl::string_view peer);

// The numbers a request asked for, by field name, in this order. Two fit
// without an allocation: a record is made for every call, and most are
// never written.
using AuditFields = absl::InlinedVector<std::pair<std::string, int64_t>, 2>;

// One audited call.
struct AuditRecord {
  std::string identity;
  std::string peer;
  std::string method;
  std::string collection;  // "" for ListCollections
  AuditFields request;
  absl::Status outcome;
};

// `text` as a JSON string literal, quotes included. Valid UTF-8 stays as it
// is, except '"', '\\', control characters (C0, DEL and C1, U+0085
// included), the line separators U+2028 and U+2029 and the bidirectional
// controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which are
// escaped (\uXXXX): a line is one line for any reader that splits on Unicode
// line breaks, and shows in a terminal in the order it was written. Each
// byte of an invalid sequence becomes U+FFFD, so the line is always valid
// JSON.
std::string JsonString(absl::string_view text);

// The record as one JSON object (no newline), stamped with `time`. A
// collection name is cut to its first kMaxCollectionNameBytes bytes (only a
// refused name can be longer), so a line is at most about 1.8 KB plus
// twice the identity's length.
std::string AuditJson(const AuditRecord& record, absl::Time time);

// Refusal lines written in one second for each caller by default, and for
// all anonymous callers together. A refusal line is about 270 bytes, 1.8 KB
// at most (a 256-byte name of escaped bytes) plus twice the identity's
// length: callers without credentials write 27 KB/s (2.4 GB a day)
// typically, 180 KB/s (16 GB a day) at most, plus one summary line a
// second; each authenticated identity refused adds at most a fifth of that.
inline constexpr int kDefaultAuditRefusalsPerSecond = 20;
inline constexpr int kDefaultAuditAnonymousRefusalsPerSecond = 100;

// The most callers and collections a summary line names, and tracks.
inline constexpr int kMaxSummaryTop = 10;
inline constexpr int kMaxSummaryKeys = 1000;

struct AuditLogOptions {
  // Refusal lines written in one second for each caller (an authenticated
  // identity, or the address of anonymous callers); 0: no limit.
  int refusals_per_second = kDefaultAuditRefusalsPerSecond;
  // Refusal lines of all anonymous callers together in one second; 0: no
  // limit.
  int anonymous_refusals_per_second = kDefaultAuditAnonymousRefusalsPerSecond;
  // Called (outside the log's lock) once for each refusal counted instead
  // of written, e.g. to count it in a metric; may be empty.
  std::function<void()> on_suppressed;
  // With a file: what its writer queues at most, and what runs (on the
  // caller's thread) for each line dropped because the queue was full;
  // may be empty. On stderr, StderrLines() counts its drops.
  size_t max_queued_bytes = kDefaultMaxQueuedLogBytes;
  std::function<void()> on_line_dropped;
};

// How long Flush waits for the lines to be written: a stalled stderr
// reader must not hold a stopping server for long.
inline constexpr absl::Duration kAuditFlushTimeout = absl::Seconds(2);

class AuditLog {
 public:
  // Lines to stderr (StderrLines()). `clock` must outlive the log.
  explicit AuditLog(const Clock* clock, AuditLogOptions options = {});
  // Lines appended to `path` (created owner-only if it does not exist);
  // INVALID_ARGUMENT naming it if it cannot be opened. `clock` must outlive
  // the log.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(
      const std::string& path, const Clock* clock,
      AuditLogOptions options = {});
  // Flushes.
  ~AuditLog();

  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Writes the line of an administrative call that passed authorization
  // (whatever the store then said): never suppressed.
  void Write(const AuditRecord& record);
  // Writes the line of a refused call, or counts it if its caller (or all
  // anonymous callers) had their lines this second already.
  void WriteRefusal(const AuditRecord& record);
  // Writes the summary of the refusals counted and not yet summarized, if
  // any, now rather than before the next line; then waits up to
  // kAuditFlushTimeout for every line so far to be written.
  void Flush();
  // Waits up to `timeout` for every line so far to be written; whether
  // they were.
  bool WaitUntilWritten(absl::Duration timeout);

 private:
  // The refusals counted since the last summary.
  struct Suppressed {
    int64_t count = 0;
    absl::Time first;
    absl::Time last;
    std::map<std::string, int64_t> by_method;
    std::map<std::string, int64_t> by_code;
    // The first kMaxSummaryKeys of each.
    absl::flat_hash_map<std::string, int64_t> by_caller;
    absl::flat_hash_map<std::string, int64_t> by_collection;
  };

  AuditLog(const Clock* clock, AuditLogOptions options,
           std::unique_ptr<LineWriter> file);

  // Starts a new second if `now` is not in the current one (a clock stepped
  // back also starts one, so it cannot silence refusals for long), writing
  // the summary of the last one first.
  void AdvanceWindowLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteSummaryLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLineLocked(absl::string_view line)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const AuditLogOptions options_;
  // The file's writer, or null for stderr; writer_ is the one in use.
  const std::unique_ptr<LineWriter> file_;
  LineWriter* const writer_;
  base::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Lines written this second, by caller ("anonymous ADDRESS" for
  // anonymous callers), and by all anonymous callers together.
  absl::flat_hash_map<std::string, int> lines_by_caller_ ABSL_GUARDED_BY(mu_);
  int anonymous_lines_ ABSL_GUARDED_BY(mu_) = 0;
  Suppressed suppressed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_AUDIT_LOG_H_
