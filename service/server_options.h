// ServerOptions: everything a hilo node is started with (main() fills it
// from flags; tests fill it directly), its defaults, and the rules a set of
// options must keep before a Server starts on them.
#ifndef HILO_SERVICE_SERVER_OPTIONS_H_
#define HILO_SERVICE_SERVER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "hilo/base/clock.h"
#include "service/access/audit_log.h"
#include "service/access/collection_limit.h"
#include "service/observe/exhaustion_reporter.h"
#include "service/observe/metrics.h"
#include "service/observe/observer.h"
#include "service/rpc/admin_service.h"
#include "service/store/range_size_policy.h"
#include "service/store/sqlite/sqlite_range_store.h"

namespace hilo {

// Requests are a few hundred bytes; anything bigger is refused by gRPC with
// RESOURCE_EXHAUSTED before it reaches the service.
inline constexpr int kMaxRequestBytes = 64 * 1024;

// The defaults of the limits below; docs/security.md says what each costs.
inline constexpr int kDefaultMaxConcurrentStreams = 100;
inline constexpr int64_t kDefaultMaxMemoryBytes = 256 << 20;
inline constexpr int kDefaultMaxThreads = 32;
inline constexpr int kDefaultMetricsThreads = 8;
// How far above a collection's Max a client's last_max may move it: 2^32.
// last_max exists so that a node which fell behind (restored from a
// backup, say) is pushed past what a client already saw from it; 4.3e9
// numbers is more than such a node falls behind (50 days at 1,000 IDs a
// second), while burning a collection's space up to the 2^62 cap on
// last_max takes a billion refused-looking requests instead of one. A
// refusal hands out nothing, so it is safe: the client sees
// FAILED_PRECONDITION and an operator raises the floor with SetFloor.
inline constexpr int64_t kDefaultMaxLastMaxJump = int64_t{1} << 32;

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  // The embedded store: an SQLite file, used unless postgres_uri is set.
  std::string db_path = "./hilo-data/hilo.db";
  // Whether a missing (or empty) db_path may become a new database, which
  // hands out every number from 1 again (hilo_server's --create_db). False:
  // Start fails with NOT_FOUND naming the file and the flag.
  bool create_db = false;
  // How often the server checks that db_path still names the file it
  // opened (it checks before each commit too); zero: only then.
  absl::Duration db_check_interval = absl::Seconds(1);
  // Runs once if db_path was deleted or replaced while the server ran,
  // with a status naming the file and what happened: hilo_server logs and
  // exits non-zero. Health is NOT_SERVING and every call UNAVAILABLE from
  // then on. Runs on the thread that noticed (the store's watch thread, or
  // one that ran a batch of writes).
  std::function<void(const absl::Status&)> on_database_lost;
  // The shared store: a libpq connection string (postgresql://...). Every
  // server on the database draws from the same rows.
  std::string postgres_uri;
  std::string node_tag = "A";
  // With the SQLite store: the tag the database file was created under, to
  // re-tag it as node_tag on purpose (SqliteRangeStoreOptions::retag_from).
  // Empty: a file of another tag is refused.
  std::string retag_database_from;
  // With postgres_uri, the server claims its tag in the database (see
  // NodeTagLease) so no two live servers show one tag. If another live
  // server holds node_tag, the first free one of these is taken instead;
  // with none, start-up waits up to one node_tag_lease for a crashed
  // server's claim to run out, then fails.
  std::vector<std::string> node_tag_alternates;
  absl::Duration node_tag_lease = absl::Seconds(10);
  // Test hooks: the host name and pid the lease holder names instead of
  // this host's and this process's (empty, 0: the real ones), so a test can
  // start two servers that share both, as two containers with one host
  // name and pid 1 do.
  std::string lease_host_for_testing;
  int lease_pid_for_testing = 0;
  // Test hook, with the SQLite store: runs on the store's thread right
  // before each COMMIT, as SqliteRangeStoreOptions' hook of that name (a
  // test holds calls in flight with it).
  std::function<absl::Status()> before_commit_for_testing;
  // Runs (on the store's thread) if another server took the tag over after
  // this one could not renew its claim: hilo_server logs and exits non-zero,
  // to come back under a free tag. Health is NOT_SERVING from then on.
  std::function<void(const absl::Status&)> on_node_tag_lost;
  RangeSizeLimits range_sizes;
  SyncMode sync = SyncMode::kFull;
  int max_batch = 256;
  // While the server is busy, put every thread of the process that is
  // under SCHED_OTHER under SCHED_BATCH, so they stop preempting each
  // other, and back once it is calm (BusyScheduling, MoveProcessThreads;
  // hilo_server's --cpu_scheduling=adaptive, its default). Only if the
  // thread calling Server::Start is under SCHED_OTHER: a process started
  // under another policy keeps it.
  bool batch_when_busy = true;
  // A connection's replies from one committed batch leave together
  // (ReplyCoalescer; hilo_server's --coalesce_replies, on by default).
  bool coalesce_replies = true;
  // Take ReturnRange calls without a range_token (old clients); unsafe, see
  // HiLoService.
  bool allow_returns_without_token = false;
  // Serve gRPC server reflection (off: it tells a stranger every method).
  bool enable_reflection = false;

  // Limits that keep one client from taking the node's threads, memory and
  // connections (see docs/security.md). Streams a client may have open at
  // once on one connection; more wait in the client (gRPC's own clients) or
  // are refused (REFUSED_STREAM).
  int max_concurrent_streams = kDefaultMaxConcurrentStreams;
  // gRPC's resource quota: bytes its buffers may hold for all connections
  // together, and threads its synchronous services (health, reflection) may
  // run. Above the memory bound new reads wait and connections are refused.
  int64_t max_memory_bytes = kDefaultMaxMemoryBytes;
  int max_threads = kDefaultMaxThreads;
  // A connection with no call for this long is closed (GOAWAY; clients
  // reconnect when they next call). Every connection is closed after
  // max_connection_age, its calls given max_connection_age_grace to finish.
  absl::Duration max_connection_idle = absl::Minutes(5);
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Seconds(10);
  // The server pings a connection idle for this long and closes it when
  // the ping is not answered within keepalive_timeout (a vanished peer).
  absl::Duration keepalive_time = absl::Minutes(1);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // Most bytes of collections one ListCollections reply carries; a page
  // that would pass it ends early (with a next_page_token).
  int max_list_reply_bytes = kDefaultMaxListReplyBytes;
  // Every listener_probe_interval (zero: never) the server connects to its
  // own gRPC port (ListenerProbe); after listener_probe_failures probes in
  // a row go unanswered, health turns NOT_SERVING and on_listener_deaf (if
  // set) runs on the probe's thread: hilo_server logs and exits non-zero.
  absl::Duration listener_probe_interval = absl::Seconds(5);
  absl::Duration listener_probe_timeout = absl::Seconds(2);
  int listener_probe_failures = 3;
  std::function<void(const absl::Status&)> on_listener_deaf;
  // Most collections the node stores; a NextRange or SetFloor that would
  // create one more is RESOURCE_EXHAUSTED. 0: no limit.
  int64_t max_collections = kDefaultMaxCollections;
  // Most collections the node creates in any minute (by `window_clock`); a call
  // that would create one more is RESOURCE_EXHAUSTED saying when to retry.
  // 0: no limit.
  int64_t max_collection_creations_per_minute =
      kDefaultMaxCollectionCreationsPerMinute;
  // Address of the Prometheus /metrics endpoint; empty serves none.
  std::string metrics_listen;
  // Collections with their own metrics label; the rest share "_other".
  int metrics_max_collections = kDefaultMetricsMaxCollections;
  // Workers of the metrics endpoint, and how long one may wait for a
  // request's bytes, so slow or half-sent requests cannot hold them all.
  int metrics_threads = kDefaultMetricsThreads;
  absl::Duration metrics_request_timeout = absl::Seconds(2);
  // Null means plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // The authorization policy (authz_policy.proto, text format) and the
  // bearer-token list ("NAME TOKEN" lines) it may name as "token:NAME".
  // Empty policy: every admitted client may do everything (no tokens then).
  std::string authz_policy;
  std::string authz_tokens;
  // The audit trail's file (appended to); empty: stderr.
  std::string audit_log;
  // Refused requests audited one line each per second at most, for each
  // caller (an authenticated identity, or one address of anonymous
  // callers), and for all anonymous callers together; the rest are counted
  // in a summary line (see AuditLog). 0: no limit.
  int audit_refusals_per_second = kDefaultAuditRefusalsPerSecond;
  int audit_anonymous_refusals_per_second =
      kDefaultAuditAnonymousRefusalsPerSecond;
  // A last_max more than this above Max is FAILED_PRECONDITION unless the
  // caller may administer (see kDefaultMaxLastMaxJump).
  int64_t max_last_max_jump = kDefaultMaxLastMaxJump;
  // A collection whose Max passes this share of INT64_MAX is logged once
  // (see ExhaustionReporter).
  double exhaustion_share = kDefaultExhaustionShare;
  // Null means SystemClock.
  const Clock* clock = nullptr;
  // The clock of every window and rate: the creations of the last minute,
  // the log limiters. It must never go back. Null means MonotonicClock;
  // tests inject a ManualClock (setting `clock` does not move it).
  const Clock* window_clock = nullptr;
  // Told about every finished call; null for none. Must outlive the server.
  Observer* observer = nullptr;
};

// Rejects options main() would otherwise pass on: a bad node tag, range-size
// limits or batch size. INVALID_ARGUMENT naming the option.
absl::Status ValidateServerOptions(const ServerOptions& options);

}  // namespace hilo

#endif  // HILO_SERVICE_SERVER_OPTIONS_H_
