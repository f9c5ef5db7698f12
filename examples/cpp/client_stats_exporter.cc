// Exporting hilo::ClientStats to Prometheus from an application.
//
// A prometheus-cpp Collectable reads Client::stats() when Prometheus
// scrapes, so nothing runs between scrapes and the counters are never
// stale. This program draws some IDs, hands the unused ones back, serves
// its metrics and waits for SIGINT or SIGTERM (tests/monitoring runs it):
//
//   client_stats_exporter --targets=hilo-0:50051,hilo-1:50051
//       --ids=100 --metrics_listen=127.0.0.1:9465   (one line)
//   curl -s 127.0.0.1:9465/metrics | grep hilo_client
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "hilo/client.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

ABSL_FLAG(std::vector<std::string>, targets, {"127.0.0.1:50051"},
          "hilo servers, comma-separated");
ABSL_FLAG(std::string, collection, "orders", "collection to draw IDs from");
ABSL_FLAG(int, ids, 100, "IDs to draw before serving metrics");
ABSL_FLAG(double, prefetch_at, 0.2, "ClientOptions::prefetch_at");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9465",
          "address of this program's /metrics (port 0: any free port)");

namespace {

// hilo_client_* counters, read from a Client at each scrape. The client
// must outlive the exposer that holds this collector.
class ClientStatsCollector final : public prometheus::Collectable {
 public:
  explicit ClientStatsCollector(const hilo::Client* client) : client_(client) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const hilo::ClientStats stats = client_->stats();
    std::vector<prometheus::MetricFamily> families;
    Add(&families, "hilo_client_calls_waited_total",
        "NextId calls that waited for a range from a server.",
        {{{}, stats.calls_waited}});
    Add(&families, "hilo_client_ranges_fetched_total",
        "Ranges received from servers.", {{{}, stats.ranges_fetched}});
    Add(&families, "hilo_client_ranges_prefetched_total",
        "Ranges fetched ahead of need.", {{{}, stats.ranges_prefetched}});
    Add(&families, "hilo_client_failovers_total",
        "NextRange calls another target answered.", {{{}, stats.failovers}});
    Add(&families, "hilo_client_returns_total",
        "Unused ranges handed back, by result.",
        {{{{"result", "applied"}}, stats.returns_applied},
         {{{"result", "refused"}}, stats.returns_refused},
         {{{"result", "failed"}}, stats.returns_failed}});
    std::vector<Sample> errors;
    for (const auto& [code, count] : stats.errors) {
      errors.push_back({{{"code", absl::StatusCodeToString(code)}}, count});
    }
    Add(&families, "hilo_client_errors_total",
        "Failed range fetches and returns, by status code.", std::move(errors));
    return families;
  }

 private:
  using Sample =
      std::pair<std::vector<prometheus::ClientMetric::Label>, int64_t>;

  static void Add(std::vector<prometheus::MetricFamily>* families,
                  std::string name, std::string help,
                  std::vector<Sample> samples) {
    prometheus::MetricFamily family;
    family.name = std::move(name);
    family.help = std::move(help);
    family.type = prometheus::MetricType::Counter;
    for (auto& [labels, value] : samples) {
      prometheus::ClientMetric metric;
      metric.label = std::move(labels);
      metric.counter.value = static_cast<double>(value);
      family.metric.push_back(std::move(metric));
    }
    families->push_back(std::move(family));
  }

  const hilo::Client* client_;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "client_stats_exporter: %s\n",
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Taken by sigwait below, not by a handler.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  hilo::ClientOptions options;
  options.targets = absl::GetFlag(FLAGS_targets);
  options.prefetch_at = absl::GetFlag(FLAGS_prefetch_at);
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) return Fail(client.status());

  std::unique_ptr<prometheus::Exposer> exposer;
  try {  // prometheus-cpp throws when it cannot bind
    exposer = std::make_unique<prometheus::Exposer>(
        absl::GetFlag(FLAGS_metrics_listen));
  } catch (const std::exception& e) {
    return Fail(absl::UnavailableError(e.what()));
  }
  auto collector = std::make_shared<ClientStatsCollector>(client->get());
  exposer->RegisterCollectable(collector);

  const hilo::CollectionHandle collection =
      (*client)->Collection(absl::GetFlag(FLAGS_collection));
  // A failed draw is reported and counted (hilo_client_errors_total); the
  // program goes on, as a service would.
  for (int i = 0; i < absl::GetFlag(FLAGS_ids); ++i) {
    absl::StatusOr<hilo::Id> id = collection.NextId();
    if (!id.ok()) {
      std::fprintf(stderr, "client_stats_exporter: %s\n",
                   id.status().ToString().c_str());
    }
  }
  (*client)->ReturnUnusedRanges();

  std::printf("client_stats_exporter: serving metrics on port %d\n",
              exposer->GetListeningPorts().front());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  exposer.reset();  // no scrape may reach the client once it is gone
  return 0;
}
