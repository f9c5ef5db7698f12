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
//   absl::StatusOr<std::unique_ptr<hilo::Server>> server =
//       hilo::Server::Start(options);
//   int port = (*server)->port();
//
// Thread-safe.
#ifndef HILO_SERVICE_SERVER_H_
#define HILO_SERVICE_SERVER_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "service/admin_service.h"
#include "service/clock.h"
#include "service/grpc_services.h"
#include "service/hilo_service.h"
#include "service/metrics.h"
#include "service/observer.h"
#include "service/postgres_range_store.h"
#include "service/range_size_policy.h"
#include "service/range_store.h"
#include "service/sqlite_range_store.h"

namespace hilo {

// Requests are a few hundred bytes; anything bigger is refused by gRPC with
// RESOURCE_EXHAUSTED before it reaches the service.
inline constexpr int kMaxRequestBytes = 64 * 1024;

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  // The embedded store: an SQLite file, used unless postgres_uri is set.
  std::string db_path = "./hilo-data/hilo.db";
  // The shared store: a libpq connection string (postgresql://...). Every
  // server on the database draws from the same rows.
  std::string postgres_uri;
  std::string node_tag = "A";
  RangeSizeLimits range_sizes;
  SyncMode sync = SyncMode::kFull;
  int max_batch = 256;
  // Take ReturnRange calls without a range_token (old clients); unsafe, see
  // HiLoService.
  bool allow_returns_without_token = false;
  bool enable_reflection = true;
  // Address of the Prometheus /metrics endpoint; empty serves none.
  std::string metrics_listen;
  // Collections with their own metrics label; the rest share "_other".
  int metrics_max_collections = kDefaultMetricsMaxCollections;
  // Null means plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Null means SystemClock.
  const Clock* clock = nullptr;
  // Told about every finished call; null for none. Must outlive the server.
  Observer* observer = nullptr;
};

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
  RangeStore* store() { return store_.get(); }

  // Reports NOT_SERVING on the health service while still serving calls, so
  // load balancers and readiness probes move traffic away first. Health
  // also reports NOT_SERVING while a shared store cannot reach its
  // database.
  void StartDraining();

  // Reports NOT_SERVING on the health service, stops accepting calls, lets
  // in-flight calls finish for up to `grace` (then cancels them), and
  // returns when every call is done; then closes the database. Idempotent;
  // call it from one thread.
  void Shutdown(absl::Duration grace);

 private:
  explicit Server(ServerOptions options);

  const ServerOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<ObserverList> observers_;
  // Reports health: SERVING unless draining or the store is unreachable.
  void UpdateHealth();

  std::unique_ptr<RangeStore> store_;
  std::unique_ptr<HiLoService> service_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<GrpcHiLoService> grpc_service_;
  std::unique_ptr<GrpcAdminService> grpc_admin_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  bool shut_down_ = false;
  std::mutex health_mu_;
  bool draining_ ABSL_GUARDED_BY(health_mu_) = false;
  bool store_reachable_ ABSL_GUARDED_BY(health_mu_) = true;
};

// Rejects options main() would otherwise pass on: a bad node tag, range-size
// limits or batch size. INVALID_ARGUMENT naming the option.
absl::Status ValidateServerOptions(const ServerOptions& options);

}  // namespace hilo

#endif  // HILO_SERVICE_SERVER_H_
