#include "service/server.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/validation.h"

namespace hilo {

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (absl::Status s = ValidateNodeTag(options.node_tag); !s.ok()) return s;
  if (absl::Status s = ValidateRangeSizeLimits(options.range_sizes); !s.ok()) {
    return s;
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  if (options.listen.empty()) {
    return absl::InvalidArgumentError("listen address is empty");
  }
  return absl::OkStatus();
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) return s;
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const ServerOptions& opts = server->options_;
  const Clock* clock =
      opts.clock != nullptr ? opts.clock : SystemClock::Get();

  SqliteRangeStoreOptions store_options;
  store_options.path = opts.db_path;
  store_options.sync = opts.sync;
  store_options.max_batch = opts.max_batch;
  store_options.clock = clock;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(store_options));
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  server->service_ = std::make_unique<HiLoService>(
      server->store_.get(), RangeSizePolicy(opts.range_sizes), opts.node_tag,
      clock, opts.observer);

  // Both are process-wide switches; they must precede the builder.
  grpc::EnableDefaultHealthCheckService(true);
  if (opts.enable_reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  // Without this, a second server could silently share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.AddListeningPort(opts.listen,
                           opts.credentials != nullptr
                               ? opts.credentials
                               : grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    server->grpc_server_.reset();
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen on %s: the address is in use or invalid",
        opts.listen));
  }
  server->grpc_server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (grpc_server_ != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(false);
    grpc_server_->Shutdown(
        std::chrono::system_clock::now() +
        absl::ToChronoMilliseconds(std::max(grace, absl::ZeroDuration())));
    grpc_server_->Wait();
  }
  service_.reset();
  store_.reset();
}

}  // namespace hilo
