#include "service/observe/metrics.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "prometheus/exposer.h"
#include "service/access/collection_limit.h"

namespace hilo {
namespace {

prometheus::Histogram::BucketBoundaries PowersOfTwo(double from, double to) {
  prometheus::Histogram::BucketBoundaries bounds;
  for (double b = from; b <= to; b *= 2) bounds.push_back(b);
  return bounds;
}

// 50 µs to about 1.6 s: a commit is one fsync, a request one commit.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return PowersOfTwo(0.00005, 2.0);
}

}  // namespace

Metrics::Metrics(const MetricsOptions& options)
    : max_collections_(options.max_collections),
      registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("hilo_requests_total")
                    .Help("Range requests finished, by RPC method and gRPC "
                          "status code.")
                    .Register(*registry_)),
      ids_reserved_(prometheus::BuildCounter()
                        .Name("hilo_ids_reserved_total")
                        .Help("Numbers handed out in ranges (the sum of range "
                              "sizes) since the node started, by collection; "
                              "a collection this node counted from its first "
                              "number, whose count would be its Max, under "
                              "_other until the node restarts.")
                        .Register(*registry_)),
      range_size_(prometheus::BuildHistogram()
                      .Name("hilo_range_size")
                      .Help("Size of each range handed out.")
                      .Register(*registry_)
                      .Add({}, PowersOfTwo(32, 1 << 20))),
      returns_(prometheus::BuildCounter()
                   .Name("hilo_returns_total")
                   .Help("ReturnRange calls that succeeded, by whether Max "
                         "moved back (applied) or not (refused).")
                   .Register(*registry_)),
      durations_(prometheus::BuildHistogram()
                     .Name("hilo_request_duration_seconds")
                     .Help("Time to serve a request, by RPC method.")
                     .Register(*registry_)),
      returns_applied_(&returns_.Add({{"result", "applied"}})),
      returns_refused_(&returns_.Add({{"result", "refused"}})),
      next_duration_(
          &durations_.Add({{"method", "NextRange"}}, LatencyBuckets())),
      return_duration_(
          &durations_.Add({{"method", "ReturnRange"}}, LatencyBuckets())),
      commit_duration_(prometheus::BuildHistogram()
                           .Name("hilo_store_commit_duration_seconds")
                           .Help("Time of each durable store commit.")
                           .Register(*registry_)
                           .Add({}, LatencyBuckets())),
      commit_operations_(prometheus::BuildHistogram()
                             .Name("hilo_store_commit_operations")
                             .Help("Operations made durable by one store "
                                   "commit (group commit batch size).")
                             .Register(*registry_)
                             .Add({}, PowersOfTwo(1, 1024))),
      collections_(prometheus::BuildGauge()
                       .Name("hilo_collections")
                       .Help("Collections stored on this node.")
                       .Register(*registry_)
                       .Add({})),
      denied_(prometheus::BuildCounter()
                  .Name("hilo_requests_denied_total")
                  .Help("Requests refused before the store changed: by the "
                        "authorization policy (reason=\"permission\") or "
                        "the last_max guard rail (reason=\"guard_rail\"), "
                        "by RPC method.")
                  .Register(*registry_)),
      collection_max_share_(
          prometheus::BuildGauge()
              .Name("hilo_collection_max_share")
              .Help("The highest Max among the collections this node served "
                    "since it started (NextRange, SetFloor), as a share of "
                    "INT64_MAX, the end of every collection's ID space. "
                    "Which collection: the node's exhaustion log line.")
              .Register(*registry_)
              .Add({})),
      creations_refused_(
          prometheus::BuildCounter()
              .Name("hilo_collection_creations_refused_total")
              .Help("NextRange and SetFloor calls refused because they would "
                    "create a collection: the node stores --max_collections "
                    "(reason=\"max_collections\") or created "
                    "--max_collection_creations_per_minute in the last minute "
                    "(reason=\"rate\"), or the caller's identity created its "
                    "policy's collection_creations_per_minute "
                    "(reason=\"identity_rate\").")
              .Register(*registry_)),
      // All exist from the start, like the series of denied_.
      refused_for_count_(
          &creations_refused_.Add({{"reason", kRefusedForCount}})),
      refused_for_rate_(&creations_refused_.Add({{"reason", kRefusedForRate}})),
      refused_for_identity_rate_(
          &creations_refused_.Add({{"reason", kRefusedForIdentityRate}})),
      audit_lines_suppressed_(
          prometheus::BuildCounter()
              .Name("hilo_audit_lines_suppressed_total")
              .Help("Refused requests counted in an audit summary line "
                    "instead of written one by one, past "
                    "--audit_refusals_per_second.")
              .Register(*registry_)
              .Add({})),
      history_rewinds_(
          prometheus::BuildCounter()
              .Name("hilo_store_history_rewinds_total")
              .Help("Times the store found that its database's history went "
                    "back (a promoted standby, a restore) and moved "
                    "collections on past their reservations.")
              .Register(*registry_)
              .Add({})),
      history_collections_moved_(
          prometheus::BuildCounter()
              .Name("hilo_store_history_collections_moved_total")
              .Help("Collections moved on past their reservations after the "
                    "database's history went back.")
              .Register(*registry_)
              .Add({})),
      history_numbers_skipped_(
          prometheus::BuildCounter()
              .Name("hilo_store_history_numbers_skipped_total")
              .Help("Numbers skipped (never handed out) by moving "
                    "collections on after the database's history went back.")
              .Register(*registry_)
              .Add({})),
      log_lines_dropped_(
          prometheus::BuildCounter()
              .Name("hilo_log_lines_dropped_total")
              .Help("Lines dropped because their log was not read fast "
                    "enough: the queue of its writer thread was full (a "
                    "stalled stderr reader, a slow disk). log=\"audit\" "
                    "for --audit_log, log=\"stderr\" for stderr (the audit "
                    "trail too without --audit_log).")
              .Register(*registry_)),
      audit_lines_dropped_(&log_lines_dropped_.Add({{"log", "audit"}})),
      stderr_lines_dropped_(&log_lines_dropped_.Add({{"log", "stderr"}})) {
  // Every series exists from the start, so a rate() over it works before
  // the first refusal.
  for (const char* method :
       {"NextRange", "ReturnRange", "GetCollection", "ListCollections",
        "SetFloor", "DeleteCollection"}) {
    for (const char* reason : {"permission", "guard_rail"}) {
      denied_.Add({{"method", method}, {"reason", reason}});
    }
  }
  prometheus::BuildGauge()
      .Name("hilo_build_info")
      .Help("Always 1; labels carry the version and node tag.")
      .Register(*registry_)
      .Add({{"version", options.version}, {"node_tag", options.node_tag}})
      .Set(1);
}

Metrics::CollectionSeries Metrics::SeriesOf(absl::string_view collection,
                                            const Range& range) {
  auto it = by_collection_.find(collection);
  if (it != by_collection_.end()) return it->second;
  // From its first number, its count would be its Max (less what came
  // back): the metrics port must never show a collection's Max.
  bool own_label = !labels_closed_ &&
                   static_cast<int>(by_collection_.size()) < max_collections_;
  if (own_label && (range.low == 1 || unlabelled_.contains(collection))) {
    own_label = false;
    if (!unlabelled_.contains(collection)) {
      if (unlabelled_.size() < static_cast<size_t>(kMaxUnlabelledCollections)) {
        unlabelled_.emplace(collection);
      } else {
        labels_closed_ = true;  // one forgotten would get a label later
      }
    }
  }
  if (!own_label) {
    if (other_ids_reserved_ == nullptr) {
      other_ids_reserved_ =
          &ids_reserved_.Add({{"collection", std::string(kOtherCollections)}});
    }
    return CollectionSeries{other_ids_reserved_};
  }
  const CollectionSeries series{
      &ids_reserved_.Add({{"collection", std::string(collection)}})};
  by_collection_.emplace(std::string(collection), series);
  return series;
}

void Metrics::NoteCollectionMax(int64_t max) {
  base::MutexLock lock(&mu_);
  if (max <= highest_max_) return;
  highest_max_ = max;
  collection_max_share_.Set(static_cast<double>(max) /
                            static_cast<double>(INT64_MAX));
}

prometheus::Counter& Metrics::RequestCounter(int method,
                                             absl::StatusCode code) {
  static constexpr const char* kMethods[] = {"NextRange", "ReturnRange"};
  auto add = [&]() -> prometheus::Counter& {
    return requests_.Add({{"method", kMethods[method]},
                          {"code", absl::StatusCodeToString(code)}});
  };
  const int c = static_cast<int>(code);
  if (c < 0 || c >= kRequestCodes) return add();
  std::atomic<prometheus::Counter*>& slot = request_series_[method][c];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add gives every caller the same series for the same labels,
    // so threads racing here store the same pointer.
    counter = &add();
    slot.store(counter, std::memory_order_release);
  }
  return *counter;
}

void Metrics::OnNextRange(absl::string_view collection,
                          const absl::Status& status, const Range* range,
                          absl::Duration elapsed) {
  RequestCounter(kNextRangeRequests, status.code()).Increment();
  next_duration_->Observe(absl::ToDoubleSeconds(elapsed));
  CountCreationRefusal(status);
  if (range != nullptr) {
    {
      base::MutexLock lock(&mu_);
      SeriesOf(collection, *range)
          .ids_reserved->Increment(static_cast<double>(range->size()));
    }
    range_size_.Observe(static_cast<double>(range->size()));
    NoteCollectionMax(range->high);
  }
}

void Metrics::OnReturnRange(absl::string_view collection,
                            const absl::Status& status,
                            const ReturnOutcome* outcome,
                            absl::Duration elapsed) {
  RequestCounter(kReturnRangeRequests, status.code()).Increment();
  return_duration_->Observe(absl::ToDoubleSeconds(elapsed));
  if (outcome != nullptr) {
    (outcome->applied ? returns_applied_ : returns_refused_)->Increment();
  }
}

void Metrics::OnSetFloor(absl::string_view collection,
                         const absl::Status& status,
                         const FloorOutcome* outcome) {
  CountCreationRefusal(status);
  if (outcome != nullptr) NoteCollectionMax(outcome->max);
}

void Metrics::CountCreationRefusal(const absl::Status& status) {
  const absl::string_view reason = CollectionRefusalReason(status);
  if (reason == kRefusedForCount) refused_for_count_->Increment();
  if (reason == kRefusedForRate) refused_for_rate_->Increment();
  if (reason == kRefusedForIdentityRate) {
    refused_for_identity_rate_->Increment();
  }
}

void Metrics::OnDenied(absl::string_view method, absl::string_view reason) {
  denied_
      .Add({{"method", std::string(method)}, {"reason", std::string(reason)}})
      .Increment();
}

void Metrics::OnAuditLineSuppressed() { audit_lines_suppressed_.Increment(); }

void Metrics::OnHistoryWentBack(int64_t collections, int64_t numbers) {
  history_rewinds_.Increment();
  history_collections_moved_.Increment(static_cast<double>(collections));
  history_numbers_skipped_.Increment(static_cast<double>(numbers));
}

void Metrics::OnAuditLineDropped() { audit_lines_dropped_->Increment(); }

void Metrics::OnStderrLineDropped() { stderr_lines_dropped_->Increment(); }

void Metrics::OnCommit(absl::Duration elapsed, int operations,
                       int64_t collections) {
  commit_duration_.Observe(absl::ToDoubleSeconds(elapsed));
  commit_operations_.Observe(operations);
  collections_.Set(static_cast<double>(collections));
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry,
    int threads, absl::Duration request_timeout) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  // CivetWeb's options. A worker waits at most request_timeout_ms for a
  // request's bytes (and to send a reply); a closed keep-alive costs none.
  std::vector<std::string> options = {
      "listening_ports",
      address,
      "num_threads",
      std::to_string(threads),
      "request_timeout_ms",
      std::to_string(absl::ToInt64Milliseconds(request_timeout)),
      "enable_keep_alive",
      "no",
  };
  // prometheus-cpp reports bind failures by throwing; stop that here.
  try {
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrFormat("cannot serve metrics on %s: %s", address, e.what()));
  }
  endpoint->registry_ = std::move(registry);
  endpoint->exposer_->RegisterCollectable(endpoint->registry_);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  endpoint->port_ = ports.empty() ? 0 : ports.front();
  endpoint->wake_host_ = internal::MetricsWakeHost(address);
  return endpoint;
}

namespace internal {

std::string MetricsWakeHost(absl::string_view address) {
  std::string host;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return "";
    host = std::string(address.substr(1, close - 1));
  } else if (const size_t colon = address.rfind(':');
             colon != absl::string_view::npos) {
    host = std::string(address.substr(0, colon));
  }
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

}  // namespace internal

namespace {

// Opens a TCP connection to host:port and closes it at once; numeric hosts
// only, so it never waits for a name server. Best effort.
void Knock(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) !=
      0) {
    return;
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    (void)connect(fd, found->ai_addr, found->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(found);
}

}  // namespace

MetricsEndpoint::~MetricsEndpoint() {
  if (exposer_ == nullptr) return;
  // Stopping CivetWeb (mg_stop) waits for its listening thread, which
  // looks at the stop flag only when its poll of the listening socket
  // returns: at a connection, or after up to 2 s. Left alone that added
  // 1-2 s to every SIGTERM of a server serving metrics (the default). So
  // the exposer stops on a thread of its own while this one knocks on the
  // port every 10 ms until it has: each knock ends the poll at once. A
  // knock that cannot connect costs nothing; the stop then takes its 2 s.
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped.set_value();
  });
  while (done.wait_for(std::chrono::milliseconds(10)) !=
         std::future_status::ready) {
    if (!wake_host_.empty() && port_ > 0) Knock(wake_host_, port_);
  }
  stopper.join();
}

}  // namespace hilo
