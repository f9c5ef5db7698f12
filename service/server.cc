#include "service/server.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "hilo/base/monotonic_clock.h"
#include "service/cpu_scheduling.h"
#include "service/listen_address.h"
#include "service/observe/log_limiter.h"
#include "service/rpc/idle_connection_closer.h"
#include "service/store/range_token.h"
#include "service/store/validation.h"

namespace hilo {

// Says, in the log and the audit trail, and counts that the store found its
// database's history gone back. Events that come before the metrics and
// the audit log exist (the store's Open checks the history) wait for them.
class Server::HistoryReporter {
 public:
  void Report(const StoreHistoryEvent& e) {
    // Perhaps on the store's thread while the node serves: queued, never
    // waiting for stderr's reader.
    StderrLines().Write(absl::StrFormat(
        "hilo_server: %s; moved %d collection(s) on past their "
        "reservations, skipping %d number(s), before handing out any range",
        e.reason, e.collections, e.numbers_skipped));
    base::MutexLock lock(&mu_);
    if (metrics_ == nullptr) {
      early_.push_back(e);
      return;
    }
    Tell(e);
  }
  void Attach(Metrics* metrics, AuditLog* audit) {
    base::MutexLock lock(&mu_);
    metrics_ = metrics;
    audit_ = audit;
    for (const StoreHistoryEvent& e : early_) Tell(e);
    early_.clear();
  }

 private:
  void Tell(const StoreHistoryEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    metrics_->OnHistoryWentBack(e.collections, e.numbers_skipped);
    AuditRecord record;
    record.identity = "hilo_server";
    record.method = "StoreHistoryWentBack";
    record.request = {{"collections_moved", e.collections},
                      {"numbers_skipped", e.numbers_skipped}};
    audit_->Write(record);
  }

  base::Mutex mu_;
  Metrics* metrics_ ABSL_GUARDED_BY(mu_) = nullptr;
  AuditLog* audit_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<StoreHistoryEvent> early_ ABSL_GUARDED_BY(mu_);
};

namespace {

// Linking gRPC's reflection library registers its plugin with every server
// builder; this option takes it out again when reflection is off.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

// The claim of the node tag in a shared store (see NodeTagLease).
NodeTagLease NodeTagLeaseFor(const ServerOptions& opts) {
  NodeTagLease lease;
  lease.candidates.push_back(opts.node_tag);
  lease.candidates.insert(lease.candidates.end(),
                          opts.node_tag_alternates.begin(),
                          opts.node_tag_alternates.end());
  std::string host = opts.lease_host_for_testing;
  if (host.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) host = name;
  }
  lease.holder = NewLeaseHolder(host, opts.lease_pid_for_testing != 0
                                          ? opts.lease_pid_for_testing
                                          : getpid());
  lease.duration = opts.node_tag_lease;
  if (opts.node_tag_alternates.empty()) {
    lease.wait_for_held = opts.node_tag_lease + absl::Seconds(1);
  }
  return lease;
}

// What clients must not see in an error: the store's file or address.
std::vector<std::string> StoreNamesHiddenFromClients(
    const ServerOptions& opts) {
  // The store's messages may name its file or address; hidden from
  // clients. Others (a row locked, the file lost) stay as they are.
  std::vector<std::string> names;
  if (opts.postgres_uri.empty()) {
    names.push_back(opts.db_path);
    char* absolute = realpath(opts.db_path.c_str(), nullptr);
    if (absolute != nullptr) {
      names.push_back(absolute);
      std::free(absolute);
    }
    const size_t slash = opts.db_path.rfind('/');
    if (slash != std::string::npos) {
      names.push_back(opts.db_path.substr(slash + 1));  // the file's name
    }
  } else {
    names.push_back("postgresql://");
    if (absl::StatusOr<std::string> d =
            DescribePostgresConnection(opts.postgres_uri);
        d.ok()) {
      names.push_back(*d);
    }
  }
  return names;
}

// The gRPC server's limits and switches, all from `opts`.
void ConfigureBuilder(const ServerOptions& opts, grpc::ServerBuilder& builder) {
  if (!opts.enable_reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  // Without this, a second server could silently share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // Identity only: gRPC 1.51 inflates a compressed request whole before it
  // compares it with the limit above (64 KB of gzip inflate to 63 MiB and
  // 0.2 s of CPU). A call naming a disabled algorithm in grpc-encoding is
  // cancelled UNIMPLEMENTED when its headers arrive, before its message is
  // read, so nothing is inflated. hilo's requests are a few hundred bytes:
  // no client of its compresses them.
  for (int algorithm = GRPC_COMPRESS_NONE + 1;
       algorithm < GRPC_COMPRESS_ALGORITHMS_COUNT; ++algorithm) {
    builder.SetCompressionAlgorithmSupportStatus(
        static_cast<grpc_compression_algorithm>(algorithm), false);
  }
  // What one client may hold: streams per connection, and, for all
  // connections together, gRPC's buffers and threads.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             opts.max_concurrent_streams);
  grpc::ResourceQuota quota("hilo_server");
  quota.Resize(static_cast<size_t>(opts.max_memory_bytes));
  quota.SetMaxThreads(opts.max_threads);
  builder.SetResourceQuota(quota);
  const auto ms = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d),
                                              std::numeric_limits<int>::max()));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             ms(opts.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             ms(opts.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ms(opts.max_connection_age_grace));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             ms(opts.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             ms(opts.keepalive_timeout));
}

}  // namespace

std::string NewLeaseHolder(absl::string_view host, int pid) {
  return absl::StrFormat("%s pid %d start %016x",
                         host.empty() ? "unknown-host" : host, pid,
                         NewRangeToken());
}

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      window_clock_(options_.window_clock != nullptr ? options_.window_clock
                                                     : MonotonicClock::Get()),
      node_tag_(options_.node_tag) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

int Server::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) return s;
  std::unique_ptr<Server> server(new Server(std::move(options)));
  // Told before the metrics and the audit log exist, too: Open checks the
  // database's history.
  auto history = std::make_shared<HistoryReporter>();
  server->WatchStoreHealth();
  if (absl::Status s = server->OpenStore(history); !s.ok()) return s;
  server->BuildObservers();
  if (absl::Status s = server->BuildAccess(); !s.ok()) return s;
  history->Attach(server->metrics_.get(), server->audit_log_.get());
  server->BuildServices();
  server->metrics_->OnCommit(absl::ZeroDuration(), 0,
                             server->store_->collection_count());
  if (absl::Status s = server->StartMetricsEndpoint(); !s.ok()) return s;
  if (absl::Status s = server->StartGrpcServer(); !s.ok()) return s;
  server->StartListenerProbe();
  return server;
}

void Server::WatchStoreHealth() {
  // NOT_SERVING while writes fail for want of space (StoreHealth).
  StoreHealthOptions store_health;
  if (options_.postgres_uri.empty()) {
    const size_t slash = options_.db_path.rfind('/');
    store_health.space_dir = slash == std::string::npos
                                 ? "."
                                 : options_.db_path.substr(0, slash + 1);
  }
  store_health.on_change = [this](bool) { UpdateHealth(); };
  store_health_ = std::make_unique<StoreHealth>(std::move(store_health));
}

std::function<void(absl::Duration, int, int64_t)> Server::OnCommit() {
  // Told the row count by the store itself: this may run while the store
  // drains at shutdown, when store_ no longer points at it. Nothing is
  // written before the services exist, so metrics_ is set by then.
  return [this](absl::Duration elapsed, int operations, int64_t collections) {
    metrics_->OnCommit(elapsed, operations, collections);
    store_health_->OnCommit();
  };
}

absl::Status Server::OpenStore(std::shared_ptr<HistoryReporter> history) {
  return options_.postgres_uri.empty() ? OpenSqliteStore(std::move(history))
                                       : OpenPostgresStore(std::move(history));
}

absl::Status Server::OpenPostgresStore(
    std::shared_ptr<HistoryReporter> history) {
  const ServerOptions& opts = options_;
  PostgresRangeStoreOptions store_options;
  store_options.uri = opts.postgres_uri;
  store_options.max_batch = opts.max_batch;
  // Counted for every server on the database, in the creating transaction.
  store_options.max_collections = opts.max_collections;
  store_options.clock = clock_;
  store_options.on_commit = OnCommit();
  // Clients get a short reason; the detail (which names the database)
  // is logged here, a few lines a second at most.
  store_options.on_database_error = [limiter = std::make_shared<LogLimiter>(
                                         5, 1024, window_clock_)](
                                        const absl::Status& detail) {
    if (std::optional<std::string> line = limiter->Admit(detail.ToString())) {
      StderrLines().Write(absl::StrCat("hilo_server: ", *line));
    }
  };
  store_options.on_history_went_back = [history](const StoreHistoryEvent& e) {
    history->Report(e);
  };
  store_options.on_reachability = [this](bool reachable) {
    {
      base::MutexLock lock(&health_mu_);
      store_reachable_ = reachable;
    }
    UpdateHealth();
  };
  store_options.node_tag_lease = NodeTagLeaseFor(opts);
  store_options.on_node_tag_lost = [this](const absl::Status& status) {
    {
      base::MutexLock lock(&health_mu_);
      node_tag_lost_ = true;
    }
    UpdateHealth();
    if (options_.on_node_tag_lost) {
      FlushAuditLogBeforeExit();
      options_.on_node_tag_lost(status);
    }
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(store_options));
  if (!store.ok()) return store.status();
  node_tag_ = (*store)->node_tag();
  store_ = *std::move(store);
  return absl::OkStatus();
}

absl::Status Server::OpenSqliteStore(std::shared_ptr<HistoryReporter> history) {
  const ServerOptions& opts = options_;
  SqliteRangeStoreOptions store_options;
  store_options.path = opts.db_path;
  store_options.node_tag = opts.node_tag;
  store_options.retag_from = opts.retag_database_from;
  store_options.sync = opts.sync;
  store_options.max_batch = opts.max_batch;
  store_options.clock = clock_;
  store_options.on_commit = OnCommit();
  store_options.create_if_missing = opts.create_db;
  store_options.file_check_interval = opts.db_check_interval;
  store_options.before_commit_for_testing = opts.before_commit_for_testing;
  store_options.on_history_went_back = [history](const StoreHistoryEvent& e) {
    history->Report(e);
  };
  store_options.on_file_lost = [this](const absl::Status& status) {
    {
      base::MutexLock lock(&health_mu_);
      database_lost_ = true;
    }
    UpdateHealth();
    if (options_.on_database_lost) {
      FlushAuditLogBeforeExit();
      options_.on_database_lost(status);
    }
  };
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(store_options));
  if (!store.ok()) {
    if (store.status().code() == absl::StatusCode::kNotFound &&
        !opts.create_db) {
      return absl::NotFoundError(absl::StrCat(
          store.status().message(),
          "; pass --create_db to create a new, empty database there; a new "
          "database hands out numbers from 1 again, so if this node served "
          "before, start it on its old file"));
    }
    return store.status();
  }
  sqlite_store_ = store->get();
  database_path_ = (*store)->absolute_path();
  database_created_ = (*store)->created();
  store_ = *std::move(store);
  return absl::OkStatus();
}

void Server::BuildObservers() {
  MetricsOptions metrics_options;
  metrics_options.node_tag = node_tag_;
  metrics_options.version = HILO_VERSION;
  metrics_options.max_collections = options_.metrics_max_collections;
  metrics_ = std::make_unique<Metrics>(metrics_options);
  exhaustion_ = std::make_unique<ExhaustionReporter>(options_.exhaustion_share,
                                                     window_clock_);
  observers_ = std::make_unique<ObserverList>(
      std::vector<Observer*>{metrics_.get(), exhaustion_.get(),
                             store_health_.get(), options_.observer});
}

absl::Status Server::BuildAccess() {
  const ServerOptions& opts = options_;
  if (!opts.authz_policy.empty()) {
    absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
        Authorizer::Load(opts.authz_policy, opts.authz_tokens);
    if (!authorizer.ok()) return authorizer.status();
    authorizer_ = *std::move(authorizer);
  }
  AuditLogOptions audit_options;
  audit_options.refusals_per_second = opts.audit_refusals_per_second;
  audit_options.anonymous_refusals_per_second =
      opts.audit_anonymous_refusals_per_second;
  audit_options.on_suppressed = [metrics = metrics_.get()] {
    metrics->OnAuditLineSuppressed();
  };
  // Lines no reader took in time (LineWriter): counted here, said once in
  // their log when its writer catches up.
  audit_options.on_line_dropped = [metrics = metrics_.get()] {
    metrics->OnAuditLineDropped();
  };
  stderr_drops_ = StderrLines().AddDropListener(
      [metrics = metrics_.get()] { metrics->OnStderrLineDropped(); });
  if (opts.audit_log.empty()) {
    audit_log_ = std::make_unique<AuditLog>(clock_, std::move(audit_options));
  } else {
    absl::StatusOr<std::unique_ptr<AuditLog>> audit =
        AuditLog::Open(opts.audit_log, clock_, std::move(audit_options));
    if (!audit.ok()) return audit.status();
    audit_log_ = *std::move(audit);
  }
  return absl::OkStatus();
}

void Server::BuildServices() {
  const ServerOptions& opts = options_;
  // Both stores counted their rows when they opened. A PostgreSQL store
  // holds --max_collections itself, for every server sharing it
  // (OpenPostgresStore); the node's limit keeps the rates only.
  const int64_t node_max = opts.postgres_uri.empty() ? opts.max_collections : 0;
  collection_limit_ = std::make_unique<CollectionLimit>(
      node_max, store_->collection_count(),
      opts.max_collection_creations_per_minute, window_clock_);
  service_ = std::make_unique<HiLoService>(
      store_.get(), RangeSizePolicy(opts.range_sizes), node_tag_, clock_,
      observers_.get(), opts.allow_returns_without_token,
      collection_limit_.get(), opts.max_last_max_jump);
  admin_service_ = std::make_unique<AdminService>(store_.get(), node_tag_,
                                                  opts.max_list_reply_bytes,
                                                  collection_limit_.get());
  gatekeeper_ = std::make_unique<Gatekeeper>(
      service_.get(), admin_service_.get(), authorizer_.get(), audit_log_.get(),
      observers_.get());
  gatekeeper_->HideFromClients(StoreNamesHiddenFromClients(opts));
}

absl::Status Server::StartMetricsEndpoint() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start(options_.metrics_listen, metrics_->registry(),
                             options_.metrics_threads,
                             options_.metrics_request_timeout);
  if (!endpoint.ok()) {
    // Its message names the web server's library, not the problem.
    return BindFailure(kMetricsListenFlag, options_.metrics_listen,
                       endpoint.status().message());
  }
  metrics_endpoint_ = *std::move(endpoint);
  return absl::OkStatus();
}

absl::Status Server::StartGrpcServer() {
  // Both are process-wide switches; they must precede the builder.
  grpc::EnableDefaultHealthCheckService(true);
  if (options_.enable_reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  ConfigureBuilder(options_, builder);
  builder.AddListeningPort(options_.listen,
                           options_.credentials != nullptr
                               ? options_.credentials
                               : grpc::InsecureServerCredentials(),
                           &port_);
  // HiLo and HiLoAdmin are callback services: no thread waits for a
  // commit. Health and reflection are gRPC's own (synchronous) services.
  // Only between the kernel's default and SCHED_BATCH: a process started
  // under another policy (chrt, systemd) keeps it.
  if (options_.batch_when_busy && CpuSchedulingName() == "normal") {
    // Moves every thread of the process, the committer's included. A
    // refusal (a seccomp filter) or a listing that fails is logged, a line
    // a second at most, and the threads it spared keep their policy.
    busy_ = std::make_unique<BusyScheduling>(
        BusyScheduling::Options{}, window_clock_,
        [limiter =
             std::make_shared<LogLimiter>(1, 512, window_clock_)](bool busy) {
          const std::string text =
              DescribeThreadMoves(MoveProcessThreads(busy), busy);
          if (text.empty()) return;
          if (std::optional<std::string> line = limiter->Admit(text)) {
            StderrLines().Write(absl::StrCat("hilo_server: ", *line));
          }
        });
  }
  if (options_.coalesce_replies) {
    replies_ = std::make_unique<ReplyCoalescer>(ReplyCoalescer::Options{},
                                                window_clock_);
  }
  grpc_service_ = std::make_unique<GrpcHiLoService>(
      gatekeeper_.get(), &calls_, busy_.get(), replies_.get());
  grpc_admin_service_ = std::make_unique<GrpcAdminService>(
      gatekeeper_.get(), &calls_, busy_.get(), replies_.get());
  builder.RegisterService(grpc_service_.get());
  builder.RegisterService(grpc_admin_service_.get());
  std::unique_ptr<grpc::Server> built = builder.BuildAndStart();
  if (built == nullptr || port_ == 0) {
    return BindFailure(kListenFlag, options_.listen,
                       "the address is in use or invalid");
  }
  {
    // The store may report its health from its own thread meanwhile.
    base::MutexLock lock(&health_mu_);
    grpc_server_ = std::move(built);
  }
  UpdateHealth();
  return absl::OkStatus();
}

void Server::StartListenerProbe() {
  if (options_.listener_probe_interval <= absl::ZeroDuration()) return;
  ListenerProbeOptions probe;
  probe.host = ListenHost(options_.listen);
  probe.port = port_;
  probe.interval = options_.listener_probe_interval;
  probe.timeout = options_.listener_probe_timeout;
  probe.failures = options_.listener_probe_failures;
  probe.on_deaf = [this](const absl::Status& status) {
    // NOT_SERVING for good: the process is about to exit.
    StartDraining();
    if (options_.on_listener_deaf) {
      FlushAuditLogBeforeExit();
      options_.on_listener_deaf(status);
    }
  };
  listener_probe_ = ListenerProbe::Start(std::move(probe));
}

void Server::FlushAuditLogBeforeExit() {
  // Refusals are counted only once the gRPC server runs, and Start sets
  // grpc_server_ under health_mu_ after audit_log_; the store may report a
  // lost tag before either. The file is written outside the lock: a slow
  // disk must not hold up health reports.
  bool serving;
  {
    base::MutexLock lock(&health_mu_);
    serving = grpc_server_ != nullptr;
  }
  if (serving) audit_log_->Flush();
}

void Server::UpdateHealth() {
  base::MutexLock lock(&health_mu_);
  // Also keeps a late report of the store from undoing a drain.
  if (grpc_server_ != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(
        !draining_ && store_reachable_ && !node_tag_lost_ && !database_lost_ &&
        (store_health_ == nullptr || store_health_->healthy()));
  }
}

void Server::StartDraining() {
  {
    base::MutexLock lock(&health_mu_);
    draining_ = true;
  }
  UpdateHealth();
}

absl::Status Server::CheckDatabaseFileForTesting() {
  return sqlite_store_ != nullptr ? sqlite_store_->CheckFile()
                                  : absl::OkStatus();
}

absl::Status Server::ReloadAuthz() {
  if (authorizer_ == nullptr) return absl::OkStatus();
  return authorizer_->Reload();
}

void Server::EndCalls() {
  calls_.Close();
  // Shutdown never resets audit_log_, and Flush may run on two threads.
  if (audit_log_ != nullptr) audit_log_->Flush();
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  listener_probe_.reset();
  StartDraining();
  // Not under the lock: calls still in flight may report the store's
  // health until they finish.
  grpc::Server* grpc_server;
  {
    base::MutexLock lock(&health_mu_);
    grpc_server = grpc_server_.get();
  }
  if (grpc_server != nullptr) {
    // Once no call is left, clients that keep their connections open do
    // not hold the stop to the end of the grace (idle_connection_closer.h).
    IdleConnectionCloser closer(
        [this] { return calls_.inside(); },
        [grpc_server] {
          grpc_server_cancel_all_calls(grpc_server->c_server());
        },
        std::clamp(grace, absl::ZeroDuration(), IdleConnectionCloser::kSettle));
    grpc_server->Shutdown(
        std::chrono::system_clock::now() +
        absl::ToChronoMilliseconds(std::max(grace, absl::ZeroDuration())));
    grpc_server->Wait();
  }
  metrics_endpoint_.reset();
  grpc_service_.reset();
  grpc_admin_service_.reset();
  gatekeeper_.reset();
  // main() ends with _Exit, so the destructor's flush would never run.
  if (audit_log_ != nullptr) audit_log_->Flush();  // null if Start failed
  CloseStore();
}

void Server::CloseStore() {
  base::MutexLock lock(&teardown_mu_);
  CloseStoreLocked();
}

void Server::CloseStoreLocked() {
  service_.reset();
  admin_service_.reset();
  sqlite_store_ = nullptr;
  store_.reset();
  collection_limit_.reset();
  // Its space check may be in UpdateHealth: taken out under the lock, and
  // destroyed (the check joined) outside it.
  std::unique_ptr<StoreHealth> store_health;
  {
    base::MutexLock lock(&health_mu_);
    store_health = std::move(store_health_);
  }
}

}  // namespace hilo
