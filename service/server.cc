#include "service/server.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/validation.h"

namespace hilo {
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

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (absl::Status s = ValidateNodeTag(options.node_tag); !s.ok()) return s;
  if (absl::Status s = ValidateRangeSizeLimits(options.range_sizes); !s.ok()) {
    return s;
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  if (options.metrics_max_collections < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "metrics max collections is %d; it must not be negative",
        options.metrics_max_collections));
  }
  if (options.listen.empty()) {
    return absl::InvalidArgumentError("listen address is empty");
  }
  return absl::OkStatus();
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

int Server::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) return s;
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const ServerOptions& opts = server->options_;
  const Clock* clock = opts.clock != nullptr ? opts.clock : SystemClock::Get();

  MetricsOptions metrics_options;
  metrics_options.node_tag = opts.node_tag;
  metrics_options.version = HILO_VERSION;
  metrics_options.max_collections = opts.metrics_max_collections;
  server->metrics_ = std::make_unique<Metrics>(metrics_options);
  server->observers_ = std::make_unique<ObserverList>(
      std::vector<Observer*>{server->metrics_.get(), opts.observer});

  Server* raw = server.get();
  // Told the row count by the store itself: this may run while the store
  // drains at shutdown, when store_ no longer points at it.
  auto on_commit = [raw](absl::Duration elapsed, int operations,
                         int64_t collections) {
    raw->metrics_->OnCommit(elapsed, operations, collections);
  };
  if (!opts.postgres_uri.empty()) {
    PostgresRangeStoreOptions store_options;
    store_options.uri = opts.postgres_uri;
    store_options.max_batch = opts.max_batch;
    store_options.clock = clock;
    store_options.on_commit = on_commit;
    store_options.on_reachability = [raw](bool reachable) {
      {
        std::lock_guard<std::mutex> lock(raw->health_mu_);
        raw->store_reachable_ = reachable;
      }
      raw->UpdateHealth();
    };
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
        PostgresRangeStore::Open(std::move(store_options));
    if (!store.ok()) return store.status();
    server->store_ = *std::move(store);
  } else {
    SqliteRangeStoreOptions store_options;
    store_options.path = opts.db_path;
    store_options.sync = opts.sync;
    store_options.max_batch = opts.max_batch;
    store_options.clock = clock;
    store_options.on_commit = on_commit;
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(store_options));
    if (!store.ok()) return store.status();
    server->store_ = *std::move(store);
  }
  server->service_ = std::make_unique<HiLoService>(
      server->store_.get(), RangeSizePolicy(opts.range_sizes), opts.node_tag,
      clock, server->observers_.get(), opts.allow_returns_without_token);
  server->admin_service_ =
      std::make_unique<AdminService>(server->store_.get(), opts.node_tag);
  server->metrics_->OnCommit(absl::ZeroDuration(), 0,
                             server->store_->collection_count());
  if (!opts.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(opts.metrics_listen,
                               server->metrics_->registry());
    if (!endpoint.ok()) return endpoint.status();
    server->metrics_endpoint_ = *std::move(endpoint);
  }

  // Both are process-wide switches; they must precede the builder.
  grpc::EnableDefaultHealthCheckService(true);
  if (opts.enable_reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  if (!opts.enable_reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  // Without this, a second server could silently share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.AddListeningPort(opts.listen,
                           opts.credentials != nullptr
                               ? opts.credentials
                               : grpc::InsecureServerCredentials(),
                           &server->port_);
  // HiLo and HiLoAdmin are callback services: no thread waits for a
  // commit. Health and reflection are gRPC's own (synchronous) services.
  server->grpc_service_ =
      std::make_unique<GrpcHiLoService>(server->service_.get());
  server->grpc_admin_service_ =
      std::make_unique<GrpcAdminService>(server->admin_service_.get());
  builder.RegisterService(server->grpc_service_.get());
  builder.RegisterService(server->grpc_admin_service_.get());
  std::unique_ptr<grpc::Server> built = builder.BuildAndStart();
  if (built == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen on %s: the address is in use or invalid", opts.listen));
  }
  {
    // The store may report its health from its own thread meanwhile.
    std::lock_guard<std::mutex> lock(server->health_mu_);
    server->grpc_server_ = std::move(built);
  }
  server->UpdateHealth();
  return server;
}

void Server::UpdateHealth() {
  std::lock_guard<std::mutex> lock(health_mu_);
  // Also keeps a late report of the store from undoing a drain.
  if (grpc_server_ != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(!draining_ &&
                                                            store_reachable_);
  }
}

void Server::StartDraining() {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    draining_ = true;
  }
  UpdateHealth();
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  StartDraining();
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(
        std::chrono::system_clock::now() +
        absl::ToChronoMilliseconds(std::max(grace, absl::ZeroDuration())));
    grpc_server_->Wait();
  }
  metrics_endpoint_.reset();
  grpc_service_.reset();
  grpc_admin_service_.reset();
  service_.reset();
  admin_service_.reset();
  store_.reset();
}

}  // namespace hilo
