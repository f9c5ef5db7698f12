// Server: a running hilo node: the store, the HiLo and HiLoAdmin services,
// gRPC health and reflection on one address, and Prometheus metrics on
// another.
//
// main() builds ServerOptions from flags and calls Start; tests call Start
// in-process on "127.0.0.1:0" and read the bound port back.
//
//   hilo::ServerOptions options;
//   options.listen = "127.0.0.1:0";
//   options.db_path = dir + "/hilo.db";
//   options.create_db = true;  // a new database; an existing one is opened
//   absl::StatusOr<std::unique_ptr<hilo::Server>> server =
//       hilo::Server::Start(options);
//   int port = (*server)->port();
//
// Thread-safe.
#ifndef HILO_SERVICE_SERVER_H_
#define HILO_SERVICE_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/access/audit_log.h"
#include "service/access/authorizer.h"
#include "service/access/collection_limit.h"
#include "service/access/line_writer.h"
#include "service/observe/exhaustion_reporter.h"
#include "service/observe/listener_probe.h"
#include "service/observe/metrics.h"
#include "service/observe/observer.h"
#include "service/observe/store_health.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/busy_scheduling.h"
#include "service/rpc/call_gate.h"
#include "service/rpc/gatekeeper.h"
#include "service/rpc/grpc_services.h"
#include "service/rpc/hilo_service.h"
#include "service/rpc/reply_coalescer.h"
#include "service/server_options.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/range_size_policy.h"
#include "service/store/range_store.h"
#include "service/store/sqlite/sqlite_range_store.h"

namespace hilo {

// Who claims a node tag in a shared store (NodeTagLease::holder):
// "HOST pid PID start NONCE", NONCE 64 random bits drawn anew by every
// call, so every server start is a holder of its own, never one before it,
// even two containers with one host name and pid 1. Host and pid are only
// there for people reading hilo_nodes. Thread-safe.
std::string NewLeaseHolder(absl::string_view host, int pid);

class Server {
 public:
  // Validates the options, opens the database and starts serving. Errors:
  // INVALID_ARGUMENT for bad options; the store's errors (see
  // SqliteRangeStore::Open); UNAVAILABLE if the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);

  // Shuts down (with no grace) if still running.
  ~Server();

  // The bound TCP port (useful with port 0).
  int port() const { return port_; }
  // The bound metrics port, or 0 if metrics are not served.
  int metrics_port() const;
  Metrics* metrics() { return metrics_.get(); }
  const ServerOptions& options() const { return options_; }
  // The tag in the IDs this node issues: options().node_tag, or on a
  // shared store the one it claimed.
  const std::string& node_tag() const { return node_tag_; }
  RangeStore* store() { return store_.get(); }
  // With the SQLite store: the database file's absolute path, and whether
  // Start made it a new database (rather than opening an existing one).
  const std::string& database_path() const { return database_path_; }
  bool database_created() const { return database_created_; }
  // With the SQLite store: SqliteRangeStore::CheckFile, now. Test hook.
  absl::Status CheckDatabaseFileForTesting();

  // Reads the authorization policy and token files again (SIGHUP, or a
  // periodic check: unchanged files cost a read). A bad file (a policy
  // without grants included, unless it says deny_all) is refused with
  // Authorizer::Load's error and the policy in force stays; a deleted token
  // file revokes every token. OK and nothing happens without a policy.
  absl::Status ReloadAuthz();
  // The token file (--authz_tokens) was gone at the last reload that took
  // effect: every bearer token is refused until it is back.
  bool authz_tokens_missing() const {
    return authorizer_ != nullptr && authorizer_->tokens_file_missing();
  }
  // Authorizer::generation(), or 0 without a policy.
  int64_t authz_generation() const {
    return authorizer_ == nullptr ? 0 : authorizer_->generation();
  }

  // Reports NOT_SERVING on the health service while still serving calls, so
  // load balancers and readiness probes move traffic away first. Health
  // also reports NOT_SERVING while a shared store cannot reach its
  // database, and while writes fail for want of space (StoreHealth: until a
  // commit succeeds, or the SQLite database's file system has space).
  void StartDraining();

  // Reports NOT_SERVING on the health service, stops accepting calls, lets
  // in-flight calls finish for up to `grace` (then cancels them), and
  // returns when every call is done; then closes the database. Idempotent;
  // call it from one thread.
  void Shutdown(absl::Duration grace);

  // Refuses every call from now on (UNAVAILABLE) before it reaches the
  // services, returns once the calls that had reached them have ended, and
  // flushes the audit log. For a process that exits while Shutdown, on
  // another thread, still waits for gRPC to tear down the calls it
  // cancelled: once this returns nothing the server does is left half done
  // in the store. Safe while Shutdown runs; the process must then end
  // without destroying the server.
  void EndCalls();

  // Once EndCalls has returned: closes the store and the services over it
  // as Shutdown does (the SQLite file as after a clean stop, its WAL
  // checkpointed and removed; PostgreSQL's node tag released). Safe while
  // Shutdown runs on another thread: whichever comes second finds it
  // closed. Waits for the store, as long as the store takes.
  void CloseStore() ABSL_LOCKS_EXCLUDED(teardown_mu_);

  // Whether the server moves its threads under SCHED_BATCH while busy:
  // options.batch_when_busy, and started under the kernel's default policy.
  bool batch_when_busy() const { return busy_ != nullptr; }
  // How many calls are inside the services now (past the CallGate).
  int64_t calls_in_services() const { return calls_.inside(); }
  // What the ReplyCoalescer did so far (nothing without
  // options.coalesce_replies).
  ReplyCoalescer::Counts reply_counts() const {
    return replies_ != nullptr ? replies_->counts() : ReplyCoalescer::Counts();
  }

 private:
  // Says and counts that the store found its database's history gone back.
  class HistoryReporter;

  explicit Server(ServerOptions options);

  // The steps of Start, in order. Each builds what later ones use.
  // StoreHealth (disk space) before the store, which reports its commits.
  void WatchStoreHealth();
  // The store of options_: PostgreSQL if postgres_uri is set, else SQLite;
  // its errors as the store's Open returns them.
  absl::Status OpenStore(std::shared_ptr<HistoryReporter> history);
  absl::Status OpenPostgresStore(std::shared_ptr<HistoryReporter> history);
  absl::Status OpenSqliteStore(std::shared_ptr<HistoryReporter> history);
  // Metrics, the exhaustion reporter and the list of observers.
  void BuildObservers();
  // The authorizer (if a policy is set) and the audit log.
  absl::Status BuildAccess();
  // The collection limit, HiLo and HiLoAdmin, and the gatekeeper before
  // them.
  void BuildServices();
  // The Prometheus endpoint, if options_.metrics_listen is set.
  absl::Status StartMetricsEndpoint();
  // The gRPC server, listening; health SERVING from then on.
  absl::Status StartGrpcServer();
  // The listener probe, unless its interval is zero.
  void StartListenerProbe();
  // What the store calls after each commit.
  std::function<void(absl::Duration, int, int64_t)> OnCommit();

  const ServerOptions options_;
  // options_.clock and options_.window_clock, or their defaults.
  const Clock* const clock_;
  const Clock* const window_clock_;
  std::string node_tag_;
  std::unique_ptr<Metrics> metrics_;
  // Whether the store can write; outlives store_, which reports commits.
  // Set in Start before anything runs; taken out under health_mu_ at
  // Shutdown.
  std::unique_ptr<StoreHealth> store_health_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<ObserverList> observers_;
  // CloseStore's work; teardown_mu_ held.
  void CloseStoreLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(teardown_mu_);
  // Held while the store and the services over it are torn down: by
  // Shutdown and by CloseStore, which may run at once (main's EndCalls
  // path).
  base::Mutex teardown_mu_;
  // Reports health: SERVING unless draining or the store is unreachable.
  void UpdateHealth() ABSL_LOCKS_EXCLUDED(health_mu_);
  // Writes the audit log's pending summary of refusals: the exits for a deaf
  // listener and a lost node tag end the process with _Exit.
  void FlushAuditLogBeforeExit() ABSL_LOCKS_EXCLUDED(health_mu_);

  // Null unless options_.coalesce_replies. The store's batches use it
  // until their last completion, so it outlives store_.
  std::unique_ptr<ReplyCoalescer> replies_;
  std::unique_ptr<RangeStore> store_;
  // store_, if it is the SQLite one.
  SqliteRangeStore* sqlite_store_ = nullptr;
  std::string database_path_;
  bool database_created_ = false;
  std::unique_ptr<CollectionLimit> collection_limit_;
  std::unique_ptr<HiLoService> service_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<AuditLog> audit_log_;
  // Counts StderrLines()' drops in metrics_ while the server lives.
  std::unique_ptr<LineWriter::DropListener> stderr_drops_;
  std::unique_ptr<ExhaustionReporter> exhaustion_;
  std::unique_ptr<Gatekeeper> gatekeeper_;
  // Every call passes it on its way to gatekeeper_; it outlives the gRPC
  // services, which hold it.
  CallGate calls_;
  // Null unless options_.batch_when_busy; outlives the gRPC services too.
  std::unique_ptr<BusyScheduling> busy_;
  std::unique_ptr<GrpcHiLoService> grpc_service_;
  std::unique_ptr<GrpcAdminService> grpc_admin_service_;
  // Set once Start has built it; the store may report its health (on its
  // own thread) before that.
  std::unique_ptr<grpc::Server> grpc_server_ ABSL_GUARDED_BY(health_mu_);
  std::unique_ptr<ListenerProbe> listener_probe_;
  int port_ = 0;
  bool shut_down_ = false;
  base::Mutex health_mu_;
  bool draining_ ABSL_GUARDED_BY(health_mu_) = false;
  bool store_reachable_ ABSL_GUARDED_BY(health_mu_) = true;
  bool node_tag_lost_ ABSL_GUARDED_BY(health_mu_) = false;
  bool database_lost_ ABSL_GUARDED_BY(health_mu_) = false;
};

}  // namespace hilo

#endif  // HILO_SERVICE_SERVER_H_
