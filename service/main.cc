// hilo_server: parses flags, starts a hilo node, and drains it on SIGINT or
// SIGTERM. Everything else lives in the hilo_service library.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/support/log.h"
#include "hilo/base/command_line.h"
#include "hilo/base/monotonic_clock.h"
#include "service/access/line_writer.h"
#include "service/access/tls.h"
#include "service/authz_reloader.h"
#include "service/cpu_scheduling.h"
#include "service/node_tag_choice.h"
#include "service/observe/log_limiter.h"
#include "service/server.h"
#include "service/shutdown_sequence.h"
#include "service/stop_signals.h"
#include "service/store/validation.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address to serve on (host:port); binding anything other than "
          "loopback is an explicit choice");
ABSL_FLAG(std::string, db, "./hilo-data/hilo.db",
          "SQLite database file; it must exist unless --create_db is given");
ABSL_FLAG(bool, create_db, false,
          "create --db (and its missing directories) if there is no "
          "database there; an existing one is opened. A new database hands "
          "out numbers from 1 again: give it only for a node's first start");
ABSL_FLAG(std::string, create_db_marker, "",
          "as --create_db, but only while this file exists; it is removed "
          "once the server serves. For an install script that leaves it in "
          "the state directory it has just made, so that only a node's "
          "first start may create a database (the Debian package does)");
ABSL_FLAG(std::string, store, "",
          "the shared store: a PostgreSQL connection URI "
          "(postgresql://user@host:port/db?sslmode=...); every server on the "
          "database draws from the same rows. Empty uses the SQLite file "
          "--db");
ABSL_FLAG(std::string, store_file, "",
          "read --store from this file (its first line), so no password "
          "shows in ps or a pod spec");
ABSL_FLAG(std::string, node_tag, "",
          "this node's tag, 1-4 characters of A-Z and 0-9; every node that "
          "serves the same collections needs its own. Empty: A, for a single "
          "node, said in the start-up line (--require_node_tag refuses it)");
ABSL_FLAG(bool, node_tag_from_hostname, false,
          "derive the node tag from this host's name, as a StatefulSet pod: "
          "hilo-0 -> A, hilo-1 -> B, ..., hilo-26 -> AA; overrides --node_tag");
ABSL_FLAG(bool, node_tag_hashed_from_hostname, false,
          "with --store only: a 4-character tag hashed from this host's "
          "name, for pods of a Deployment; if another live server holds it "
          "(tags are leased in the database), the next of 64 hashed from the "
          "name; overrides --node_tag");
ABSL_FLAG(bool, require_node_tag, false,
          "refuse to start unless this node's tag is chosen explicitly "
          "(--node_tag, --node_tag_from_hostname or "
          "--node_tag_hashed_from_hostname); the packaged service and the "
          "container image set it, so that two nodes left at their defaults "
          "cannot both hand out IDs as A");
ABSL_FLAG(std::string, retag_database, "",
          "the node tag the --db file was created under, to serve it as "
          "--node_tag on purpose (a file of another tag is refused); only "
          "when no IDs under the new tag can collide with the file's: see "
          "service/store/sqlite/README.md");
ABSL_FLAG(int64_t, min_range_size, hilo::kDefaultMinRangeSize,
          "smallest range handed out");
ABSL_FLAG(int64_t, max_range_size, hilo::kDefaultMaxRangeSize,
          "largest range handed out");
ABSL_FLAG(absl::Duration, range_runway, hilo::kDefaultRangeRunway,
          "how long the numbers a client in steady use holds when it asks "
          "for its next range should last (to cover a store failover): "
          "ranges double when asked for within 5/4 of it and halve after 5 "
          "times it; 0: the rule before it (double under 30s, halve over "
          "60s); at most 1h");
ABSL_FLAG(std::string, sync, "full",
          "full: a reservation covering each range is on disk (fsync) "
          "before its reply, and a start after the machine went down skips "
          "past it; normal: nothing is fsynced, and after a power loss a "
          "restarted node could reissue numbers");
ABSL_FLAG(int, max_batch, 256,
          "most requests committed in one transaction (group commit); 1 "
          "commits each alone");
ABSL_FLAG(bool, coalesce_replies, true,
          "the replies one commit answers on one TCP connection leave "
          "together (TCP_CORK from its second reply, or its first if one "
          "of its last 8 batches gave it several, until the batch's last), "
          "instead of one segment each; false sends each at once");
ABSL_FLAG(std::string, cpu_scheduling, "adaptive",
          "adaptive: as inherit, and if that is the kernel's default, every "
          "thread goes under SCHED_BATCH while the server is busy (from a "
          "call that finds 16 calls in flight until one finds 4 or fewer "
          "after 64 such calls in a row or 100 ms without more), so its "
          "threads stop preempting each other, and back once it is calm; "
          "inherit: the policy the server was started under "
          "(systemd's CPUSchedulingPolicy=, chrt); normal: the kernel's "
          "default, a thread that wakes may preempt whatever runs on its "
          "core; batch (SCHED_BATCH): it waits for the running thread, "
          "always: more NextRange per second on a host of its own, slower "
          "replies beside a process that keeps a core busy");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "on SIGTERM, how long in-flight calls may run before they are "
          "cancelled; calls still waiting for the store (a database that "
          "does not answer, a disk that does not write), or a store still "
          "closing, a second after --drain_delay plus this end the process "
          "with status 5; gRPC's teardown of the calls it cancelled is not "
          "waited for more than half a second");
ABSL_FLAG(absl::Duration, drain_delay, absl::ZeroDuration(),
          "on SIGTERM, how long to keep serving while health reports "
          "NOT_SERVING, before new calls are refused");
ABSL_FLAG(bool, enable_reflection, false,
          "serve gRPC server reflection (off by default: it lists every "
          "method to anyone who connects)");
ABSL_FLAG(int, max_concurrent_streams, hilo::kDefaultMaxConcurrentStreams,
          "most calls one connection may have open at once");
ABSL_FLAG(int64_t, max_memory_mb, hilo::kDefaultMaxMemoryBytes >> 20,
          "MiB gRPC's buffers may hold for all connections together (its "
          "resource quota)");
ABSL_FLAG(int, max_threads, hilo::kDefaultMaxThreads,
          "most threads gRPC's synchronous services (health, reflection) may "
          "run");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "close a connection that had no call for this long");
ABSL_FLAG(absl::Duration, max_connection_age, absl::Minutes(30),
          "close every connection after this long (clients reconnect)");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::Seconds(10),
          "how long a connection closed for its age may finish its calls");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Minutes(1),
          "ping a connection idle for this long");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(20),
          "close a connection whose ping is not answered within this");
ABSL_FLAG(int, max_list_reply_bytes, hilo::kDefaultMaxListReplyBytes,
          "most bytes of collections in one ListCollections reply; a page "
          "ends early past it");
ABSL_FLAG(int64_t, max_collections, hilo::kDefaultMaxCollections,
          "most collections this node stores; a NextRange or SetFloor that "
          "would create one more is RESOURCE_EXHAUSTED (0: no limit). Per "
          "server: on a shared PostgreSQL store it counts the rows found at "
          "start and this server's creations, so N servers may store N times "
          "it");
ABSL_FLAG(int64_t, max_collection_creations_per_minute,
          hilo::kDefaultMaxCollectionCreationsPerMinute,
          "most collections this node creates in any minute; a NextRange or "
          "SetFloor that would create one more is RESOURCE_EXHAUSTED saying "
          "when to retry (0: no limit). Per server: N servers on a shared "
          "PostgreSQL store create up to N times it");
ABSL_FLAG(int, metrics_threads, hilo::kDefaultMetricsThreads,
          "worker threads of the metrics endpoint");
ABSL_FLAG(absl::Duration, metrics_request_timeout, absl::Seconds(2),
          "drop a metrics request whose bytes do not arrive within this");
ABSL_FLAG(absl::Duration, listener_probe_interval, absl::Seconds(5),
          "how often the server connects to its own gRPC port to check that "
          "it still accepts connections; 0 turns the probe off");
ABSL_FLAG(int, listener_probe_failures, 3,
          "consecutive failed probes after which the server turns health "
          "NOT_SERVING and exits with status 3, for its supervisor to "
          "restart it");
ABSL_FLAG(bool, allow_returns_without_token, false,
          "UNSAFE: apply ReturnRange calls that carry no range_token (clients "
          "older than tokens); such a return can be applied twice or by a "
          "caller that never held the range");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain; with --tls_key, the gRPC port speaks TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate "
          "signed by it (mTLS)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "address of the Prometheus /metrics endpoint (host:port); empty "
          "turns metrics off");
ABSL_FLAG(int, metrics_max_collections, hilo::kDefaultMetricsMaxCollections,
          "collections that get their own metrics label; the rest share "
          "\"_other\"");
ABSL_FLAG(std::string, authz_policy, "",
          "authorization policy (protobuf text format of "
          "service/access/authz_policy.proto): which identities may use which "
          "collections and HiLoAdmin. Reloaded on SIGHUP and when it "
          "changes; a bad file (one without grants too, unless it says "
          "deny_all: true) is refused and the old policy kept. Empty: "
          "trust every admitted client");
ABSL_FLAG(std::string, authz_tokens, "",
          "bearer tokens, one \"NAME TOKEN\" a line; a call with "
          "\"authorization: Bearer TOKEN\" is identity token:NAME (tokens of "
          "16 to 512 bytes). Reloaded with --authz_policy; deleted while the "
          "server runs, it revokes every token; send tokens only over TLS");
ABSL_FLAG(absl::Duration, authz_reload_interval, absl::Seconds(5),
          "how often to check --authz_policy and --authz_tokens for changes "
          "(SIGHUP reloads at once); 0: only on SIGHUP");
ABSL_FLAG(std::string, audit_log, "",
          "append the audit trail (one JSON line per SetFloor, per "
          "DeleteCollection and per refused request) to this file; empty: "
          "stderr");
ABSL_FLAG(int, audit_refusals_per_second, hilo::kDefaultAuditRefusalsPerSecond,
          "audit at most this many refused requests a second, one line each, "
          "for each caller: each authenticated identity, and each peer "
          "address of anonymous callers; the rest are counted in one summary "
          "line a second; 0: no limit");
ABSL_FLAG(int, audit_anonymous_refusals_per_second,
          hilo::kDefaultAuditAnonymousRefusalsPerSecond,
          "audit at most this many refused requests of anonymous callers a "
          "second, all addresses together (the default bounds what callers "
          "without credentials write to 27 KB/s typically, 180 KB/s at "
          "most); 0: no limit");
ABSL_FLAG(int64_t, max_last_max_jump, hilo::kDefaultMaxLastMaxJump,
          "refuse (FAILED_PRECONDITION) a last_max more than this above the "
          "collection's Max, unless the caller may administer; the default "
          "2^32 lets a node that fell behind catch up, not a client burn "
          "the ID space");
ABSL_FLAG(double, exhaustion_share, hilo::kDefaultExhaustionShare,
          "log a collection once its Max passes this share of INT64_MAX "
          "(default 1/16: no workload gets there by handing out IDs)");

namespace {

// The exit status when the gRPC listener went deaf (see ListenerProbe).
constexpr int kExitListenerDeaf = 3;
// The exit status when another server took this one's node tag over.
constexpr int kExitNodeTagLost = 4;
// SIGTERM's shutdown overran its bound: hilo::kExitShutdownOverran (5).
// The exit status when the SQLite database file was deleted or replaced
// under the running server.
constexpr int kExitDatabaseLost = 6;

// Raises the soft limit on open files to the hard limit: every connection
// is a descriptor, and gRPC 1.51's listener stops for good when it runs out.
void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// gRPC's own log lines are noise while we report start-up errors ourselves.
std::atomic<bool> grpc_logs_enabled{false};

// Malformed requests make gRPC log; a flood of them must not flood stderr:
// at most 10 lines a second, each cut to 256 bytes.
hilo::LogLimiter& GrpcLogLimiter() {
  static hilo::LogLimiter* limiter =
      new hilo::LogLimiter(10, 256, hilo::MonotonicClock::Get());
  return *limiter;
}

void ForwardGrpcLog(gpr_log_func_args* args) {
  if (!grpc_logs_enabled.load(std::memory_order_relaxed)) return;
  std::optional<std::string> line = GrpcLogLimiter().Admit(args->message);
  if (!line.has_value()) return;
  // Often on a gRPC thread: queued, never waiting for stderr's reader.
  hilo::StderrLines().Write(
      absl::StrFormat("hilo_server: grpc %s: %s",
                      gpr_log_severity_string(args->severity), *line));
}

// Says `line` through StderrLines(), which never blocks the caller (often
// a request or store thread) on a slow reader of stderr.
void Say(std::string line) { hilo::StderrLines().Write(line); }

// Says `line`, waits (at most a second) for it to be written, and ends the
// process with `code` at once: the server's threads are left as they are.
[[noreturn]] void ExitSaying(int code, std::string line) {
  Say(std::move(line));
  hilo::StderrLines().WaitUntilWritten(absl::Seconds(1));
  std::fflush(nullptr);
  std::_Exit(code);
}

// A refused start: one line naming the problem, exit status 1.
int Fail(const absl::Status& status) {
  Say(absl::StrCat("hilo_server: ", status.message()));
  hilo::StderrLines().WaitUntilWritten(absl::Seconds(1));
  return EXIT_FAILURE;
}

absl::StatusOr<std::string> HostName() {
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the host name: ", strerror(errno)));
  }
  return std::string(hostname);
}

// The PostgreSQL connection URI of --store or --store_file (at most one), or
// "" for the SQLite store.
absl::StatusOr<std::string> StoreUriFromFlags(const std::string& store,
                                              const std::string& store_file) {
  std::string uri = store;
  if (!store_file.empty()) {
    if (!store.empty()) {
      return absl::InvalidArgumentError(
          "--store and --store_file are both set; use one");
    }
    std::ifstream in(store_file);
    if (!in || !std::getline(in, uri)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--store_file %s cannot be read: %s", store_file,
                          in.eof() ? "it is empty" : strerror(errno)));
    }
    uri = std::string(absl::StripAsciiWhitespace(uri));
  }
  if (!uri.empty() && !absl::StartsWith(uri, "postgresql://") &&
      !absl::StartsWith(uri, "postgres://")) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--store must be a PostgreSQL connection URI "
                        "(postgresql://...), not \"%s\"",
                        uri.substr(0, uri.find(':'))));
  }
  return uri;
}

// Reads the command line: every setting is a flag.
void ParseFlags(int argc, char** argv) {
  const std::vector<std::string> args = hilo::base::ParseCommandLine(
      argc, argv, "hilo_server",
      "Serves the hilo.v1.HiLo gRPC service from an SQLite database or a "
      "shared PostgreSQL one.\n"
      "Usage: hilo_server [--listen=127.0.0.1:50051] [--db=PATH | "
      "--store=postgresql://...] "
      "[--node_tag=A] ...",
      {
          {"Listening",
           {"listen", "max_concurrent_streams", "max_memory_mb", "max_threads",
            "max_connection_idle", "max_connection_age",
            "max_connection_age_grace", "keepalive_time", "keepalive_timeout",
            "enable_reflection"}},
          {"Storage",
           {"db", "create_db", "create_db_marker", "store", "store_file",
            "sync", "max_batch"}},
          {"Node tag",
           {"node_tag", "node_tag_from_hostname",
            "node_tag_hashed_from_hostname", "require_node_tag",
            "retag_database"}},
          {"Ranges",
           {"min_range_size", "max_range_size", "range_runway",
            "max_last_max_jump", "allow_returns_without_token"}},
          {"Limits",
           {"max_list_reply_bytes", "max_collections",
            "max_collection_creations_per_minute"}},
          {"TLS and authorization",
           {"tls_cert", "tls_key", "tls_client_ca", "authz_policy",
            "authz_tokens", "authz_reload_interval", "audit_log",
            "audit_refusals_per_second",
            "audit_anonymous_refusals_per_second"}},
          {"Metrics and health",
           {"metrics_listen", "metrics_threads", "metrics_request_timeout",
            "metrics_max_collections", "exhaustion_share",
            "listener_probe_interval", "listener_probe_failures"}},
          {"Shutdown", {"shutdown_grace", "drain_delay"}},
          {"Scheduling", {"cpu_scheduling", "coalesce_replies"}},
      });
  if (!args.empty()) {
    std::exit(Fail(absl::InvalidArgumentError(absl::StrFormat(
        "unexpected argument \"%s\"; every setting is a --flag", args[0]))));
  }
}

// What the process needs before any thread starts: descriptors, quiet
// lock bookkeeping, gRPC's log through ours, and the stop signals blocked
// in every thread (main waits for them); returns those signals.
sigset_t PrepareProcess() {
  RaiseFileLimit();
  // Debian builds Abseil without NDEBUG, so every absl::Mutex in the process
  // (gRPC's included) records its lock order for deadlock detection, a cost
  // the profile of a NextRange showed. hilo's own locks are checked by the
  // compiler (the thread-safety preset) and by TSan instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  gpr_set_log_function(ForwardGrpcLog);
  return hilo::BlockStopSignals();
}

// --cpu_scheduling, for the calling thread and every thread it starts
// later: called before the process starts its second thread. The
// scheduling it applied.
absl::StatusOr<hilo::CpuScheduling> CpuSchedulingFromFlags() {
  absl::StatusOr<hilo::CpuScheduling> scheduling =
      hilo::ParseCpuScheduling(absl::GetFlag(FLAGS_cpu_scheduling));
  if (!scheduling.ok()) return scheduling.status();
  if (absl::Status s = hilo::ApplyCpuScheduling(*scheduling); !s.ok()) return s;
  return scheduling;
}

// The store flags: --store or --store_file, --db, --create_db and its
// marker (a marker that exists means --create_db).
absl::Status StorageFromFlags(hilo::ServerOptions& options) {
  options.db_path = absl::GetFlag(FLAGS_db);
  absl::StatusOr<std::string> store = StoreUriFromFlags(
      absl::GetFlag(FLAGS_store), absl::GetFlag(FLAGS_store_file));
  if (!store.ok()) return store.status();
  options.postgres_uri = *store;
  options.create_db = absl::GetFlag(FLAGS_create_db);
  const std::string create_db_marker = absl::GetFlag(FLAGS_create_db_marker);
  if ((options.create_db || !create_db_marker.empty()) &&
      !options.postgres_uri.empty()) {
    return absl::InvalidArgumentError(
        "--create_db is for the SQLite file --db; with --store there "
        "is no file to create");
  }
  if (!create_db_marker.empty() &&
      access(create_db_marker.c_str(), F_OK) == 0) {
    options.create_db = true;
  }
  absl::StatusOr<hilo::SyncMode> sync =
      hilo::ParseSyncMode(absl::GetFlag(FLAGS_sync));
  if (!sync.ok()) return sync.status();
  options.sync = *sync;
  options.max_batch = absl::GetFlag(FLAGS_max_batch);
  return absl::OkStatus();
}

// The node-tag flags, by ChooseNodeTag's rules.
absl::StatusOr<hilo::NodeTagChoice> NodeTagFromFlags(
    hilo::ServerOptions& options) {
  hilo::NodeTagRequest tag_request;
  tag_request.node_tag = absl::GetFlag(FLAGS_node_tag);
  tag_request.from_hostname = absl::GetFlag(FLAGS_node_tag_from_hostname);
  tag_request.hashed_from_hostname =
      absl::GetFlag(FLAGS_node_tag_hashed_from_hostname);
  tag_request.require_chosen = absl::GetFlag(FLAGS_require_node_tag);
  tag_request.shared_store = !options.postgres_uri.empty();
  absl::StatusOr<hilo::NodeTagChoice> tag =
      hilo::ChooseNodeTag(tag_request, HostName);
  if (!tag.ok()) return tag.status();
  options.node_tag = tag->node_tag;
  options.node_tag_alternates = tag->alternates;
  options.retag_database_from = absl::GetFlag(FLAGS_retag_database);
  return tag;
}

// The flags that bound ranges, connections, collections and metrics.
void LimitsFromFlags(hilo::ServerOptions& options) {
  options.listen = absl::GetFlag(FLAGS_listen);
  options.range_sizes.min_size = absl::GetFlag(FLAGS_min_range_size);
  options.range_sizes.max_size = absl::GetFlag(FLAGS_max_range_size);
  options.range_sizes.runway = absl::GetFlag(FLAGS_range_runway);
  options.allow_returns_without_token =
      absl::GetFlag(FLAGS_allow_returns_without_token);
  options.enable_reflection = absl::GetFlag(FLAGS_enable_reflection);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.max_memory_bytes = absl::GetFlag(FLAGS_max_memory_mb) << 20;
  options.max_threads = absl::GetFlag(FLAGS_max_threads);
  options.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.max_connection_age_grace =
      absl::GetFlag(FLAGS_max_connection_age_grace);
  options.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  options.max_list_reply_bytes = absl::GetFlag(FLAGS_max_list_reply_bytes);
  options.max_collections = absl::GetFlag(FLAGS_max_collections);
  options.max_collection_creations_per_minute =
      absl::GetFlag(FLAGS_max_collection_creations_per_minute);
  options.metrics_threads = absl::GetFlag(FLAGS_metrics_threads);
  options.metrics_request_timeout =
      absl::GetFlag(FLAGS_metrics_request_timeout);
  options.listener_probe_interval =
      absl::GetFlag(FLAGS_listener_probe_interval);
  options.listener_probe_failures =
      absl::GetFlag(FLAGS_listener_probe_failures);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.metrics_max_collections =
      absl::GetFlag(FLAGS_metrics_max_collections);
  options.max_last_max_jump = absl::GetFlag(FLAGS_max_last_max_jump);
  options.exhaustion_share = absl::GetFlag(FLAGS_exhaustion_share);
}

// TLS, authorization and audit flags.
absl::Status AccessFromFlags(hilo::ServerOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      hilo::ServerCredentialsFromFiles({absl::GetFlag(FLAGS_tls_cert),
                                        absl::GetFlag(FLAGS_tls_key),
                                        absl::GetFlag(FLAGS_tls_client_ca)});
  if (!credentials.ok()) return credentials.status();
  options.credentials = *credentials;
  options.authz_policy = absl::GetFlag(FLAGS_authz_policy);
  options.authz_tokens = absl::GetFlag(FLAGS_authz_tokens);
  options.audit_log = absl::GetFlag(FLAGS_audit_log);
  options.audit_refusals_per_second =
      absl::GetFlag(FLAGS_audit_refusals_per_second);
  options.audit_anonymous_refusals_per_second =
      absl::GetFlag(FLAGS_audit_anonymous_refusals_per_second);
  return absl::OkStatus();
}

// What the process does when the node cannot go on: one line, then exit
// with a status of its own for the supervisor. Each runs on the thread that
// noticed (a probe or store thread), so the line is queued, not written.
void SetExitHooks(hilo::ServerOptions& options) {
  options.on_listener_deaf = [](const absl::Status& status) {
    ExitSaying(kExitListenerDeaf,
               absl::StrFormat(
                   "hilo_server: the gRPC port no longer accepts connections "
                   "(%s); health is NOT_SERVING; exiting with status %d for "
                   "the supervisor to restart the server",
                   status.message(), kExitListenerDeaf));
  };
  options.on_node_tag_lost = [](const absl::Status& status) {
    ExitSaying(kExitNodeTagLost,
               absl::StrFormat("hilo_server: %s; exiting with status %d for "
                               "the supervisor to restart the server under a "
                               "free tag",
                               status.message(), kExitNodeTagLost));
  };
  options.on_database_lost = [](const absl::Status& status) {
    ExitSaying(kExitDatabaseLost,
               absl::StrFormat(
                   "hilo_server: %s; health is NOT_SERVING and no range is "
                   "handed out from it any more; exiting with status %d. "
                   "Do not start a new database in its place: restore the "
                   "file and raise every collection above what it handed "
                   "out (docs/reliability.md)",
                   status.message(), kExitDatabaseLost));
  };
}

// The one line that says the node serves, and how: which file (and whether
// it is new) or which database, so that a server started from the wrong
// directory, or on a lost volume, does not look like the real one.
// `policy`: CpuSchedulingName() before the server started.
std::string StartLine(hilo::Server& server, const hilo::ServerOptions& options,
                      const hilo::NodeTagChoice& tag,
                      const std::string& policy) {
  const char* security = options.credentials == nullptr ? "plaintext"
                         : absl::GetFlag(FLAGS_tls_client_ca).empty() ? "tls"
                                                                      : "mtls";
  std::string store_text;
  if (options.postgres_uri.empty()) {
    const int64_t collections = server.store()->collection_count();
    store_text = absl::StrFormat(
        "%s database %s with %d collection%s",
        server.database_created() ? "created NEW" : "opened existing",
        server.database_path(), collections, collections == 1 ? "" : "s");
  } else {
    store_text = absl::StrCat(
        "db ", hilo::DescribePostgresConnection(options.postgres_uri)
                   .value_or("postgresql"));
  }
  return absl::StrFormat(
      "hilo_server: serving node %s on port %d (listen %s, %s, "
      "%s, sync %s, range sizes %d..%d, max batch %d, cpu scheduling %s, "
      "reflection %s, metrics %s)%s",
      server.node_tag(), server.port(), options.listen, security, store_text,
      hilo::SyncModeName(options.sync), options.range_sizes.min_size,
      options.range_sizes.max_size, options.max_batch,
      server.batch_when_busy() ? policy + ", batch when busy" : policy,
      options.enable_reflection ? "on" : "off",
      server.metrics_port() > 0 ? absl::StrCat("port ", server.metrics_port())
                                : std::string("off"),
      hilo::DefaultNodeTagNote(tag));
}

// Waits for SIGINT or SIGTERM and returns it; meanwhile reloads the policy
// on SIGHUP and every --authz_reload_interval (AuthzReloader).
int ServeUntilStopped(hilo::Server& server, const sigset_t& stop_signals) {
  hilo::AuthzReloader reloader(&server);
  return hilo::WaitForStopSignal(
      stop_signals, absl::GetFlag(FLAGS_authz_reload_interval), [&] {
        if (std::optional<std::string> line = reloader.Reload()) Say(*line);
      });
}

}  // namespace

int main(int argc, char** argv) {
  ParseFlags(argc, argv);
  absl::StatusOr<hilo::CpuScheduling> scheduling = CpuSchedulingFromFlags();
  if (!scheduling.ok()) return Fail(scheduling.status());
  const sigset_t stop_signals = PrepareProcess();
  hilo::ServerOptions options;
  options.batch_when_busy = *scheduling == hilo::CpuScheduling::kAdaptive;
  options.coalesce_replies = absl::GetFlag(FLAGS_coalesce_replies);
  // Read before the server starts: a busy server moves this thread too.
  const std::string policy = hilo::CpuSchedulingName();
  if (absl::Status s = StorageFromFlags(options); !s.ok()) return Fail(s);
  absl::StatusOr<hilo::NodeTagChoice> tag = NodeTagFromFlags(options);
  if (!tag.ok()) return Fail(tag.status());
  LimitsFromFlags(options);
  SetExitHooks(options);
  if (absl::Status s = AccessFromFlags(options); !s.ok()) return Fail(s);

  absl::StatusOr<std::unique_ptr<hilo::Server>> server =
      hilo::Server::Start(options);
  if (!server.ok()) return Fail(server.status());
  grpc_logs_enabled.store(true);
  const std::string create_db_marker = absl::GetFlag(FLAGS_create_db_marker);
  if (!create_db_marker.empty() && unlink(create_db_marker.c_str()) != 0 &&
      errno != ENOENT) {
    // Left in place it would let a later start make a new database where
    // this one was lost: refuse to serve rather than keep it.
    return Fail(absl::UnavailableError(
        absl::StrFormat("cannot remove --create_db_marker %s: %s",
                        create_db_marker, strerror(errno))));
  }
  Say(StartLine(**server, options, *tag, policy));

  const int signal_number = ServeUntilStopped(**server, stop_signals);
  Say(absl::StrCat("hilo_server: ", strsignal(signal_number),
                   " received; draining"));
  std::unique_ptr<hilo::StoppableNode> node =
      hilo::StoppableServer(server->get());
  hilo::ShutdownSequence shutdown(
      node.get(),
      {absl::GetFlag(FLAGS_drain_delay), absl::GetFlag(FLAGS_shutdown_grace),
       hilo::ShutdownStoreName(options, (*server)->database_path())},
      ExitSaying, hilo::RealTimeShutdownTimer());
  const std::string stopped = shutdown.Run();
  // No call is left in the store, and it is closed. Skip gRPC's global
  // teardown, which waits for clients to drop idle connections (seconds).
  ExitSaying(EXIT_SUCCESS, stopped);
}
