// Metrics: Prometheus metrics of a hilo node, and the HTTP endpoint that
// serves them.
//
// Metrics is an Observer of the HiLo service and a commit listener of the
// store. Per-collection labels exist only for the first `max_collections`
// collections seen; the rest share the label value "_other", so a client
// sending random names cannot blow up the registry. The alert rules of
// deploy/monitoring/ name these metrics: rename none.
//
//   auto metrics = std::make_shared<hilo::Metrics>(hilo::MetricsOptions{...});
//   auto endpoint = hilo::MetricsEndpoint::Start("127.0.0.1:9464",
//                                                metrics->registry());
//
// Thread-safe.
#ifndef HILO_SERVICE_OBSERVE_METRICS_H_
#define HILO_SERVICE_OBSERVE_METRICS_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/observe/observer.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace hilo {

inline constexpr int kDefaultMetricsMaxCollections = 100;
// The label value shared by collections beyond the per-collection limit,
// and by those this node counted from their first number.
inline constexpr char kOtherCollections[] = "_other";
// Collections counted from their first number a node remembers (so that
// they never get a label of their own).
inline constexpr int kMaxUnlabelledCollections = 10'000;

struct MetricsOptions {
  std::string node_tag;
  std::string version;
  int max_collections = kDefaultMetricsMaxCollections;
};

class Metrics final : public Observer {
 public:
  explicit Metrics(const MetricsOptions& options);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void OnNextRange(absl::string_view collection, const absl::Status& status,
                   const Range* range, absl::Duration elapsed) override;
  void OnReturnRange(absl::string_view collection, const absl::Status& status,
                     const ReturnOutcome* outcome,
                     absl::Duration elapsed) override;
  void OnSetFloor(absl::string_view collection, const absl::Status& status,
                  const FloorOutcome* outcome) override;
  void OnDenied(absl::string_view method, absl::string_view reason) override;

  // A store commit of `operations` operations took `elapsed`; the store now
  // holds `collections` collections.
  void OnCommit(absl::Duration elapsed, int operations, int64_t collections);

  // The audit log counted a refusal instead of writing its line
  // (AuditLogOptions::on_suppressed).
  void OnAuditLineSuppressed();
  // The store found that its database's history went back and moved
  // `collections` on, skipping `numbers`.
  void OnHistoryWentBack(int64_t collections, int64_t numbers);
  // A line of the audit file, or of stderr, was dropped because its
  // writer's queue was full (LineWriter).
  void OnAuditLineDropped();
  void OnStderrLineDropped();

 private:
  // hilo_requests_total{method, code} of kNextRangeRequests or
  // kReturnRangeRequests: looked up in the family once per code, then read
  // from request_series_ (a label look-up per call cost about 1,700
  // instructions of NextRange's 95,000).
  static constexpr int kNextRangeRequests = 0;
  static constexpr int kReturnRangeRequests = 1;
  static constexpr int kRequestCodes = 17;  // absl::StatusCode 0..16
  prometheus::Counter& RequestCounter(int method, absl::StatusCode code);

  // The series of one collection label.
  struct CollectionSeries {
    prometheus::Counter* ids_reserved;
  };
  // The series of `collection`, whose range `range` this node just handed
  // out. A collection this node has counted from its first number (a range
  // from 1: Max was 0) would show its Max: it never gets a label of its own
  // in this process, and counts under kOtherCollections.
  CollectionSeries SeriesOf(absl::string_view collection, const Range& range)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Raises hilo_collection_max_share to `max`'s share of INT64_MAX if that
  // is more. No collection's name or Max is exported: the metrics port is
  // unauthenticated, and Max is what GetCollection needs admin rights for.
  void NoteCollectionMax(int64_t max);
  // Counts `status` if it refused a new collection (CollectionRefusalReason).
  void CountCreationRefusal(const absl::Status& status);

  const int max_collections_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& ids_reserved_;
  prometheus::Histogram& range_size_;
  prometheus::Family<prometheus::Counter>& returns_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Counter* returns_applied_;
  prometheus::Counter* returns_refused_;
  prometheus::Histogram* next_duration_;
  prometheus::Histogram* return_duration_;
  prometheus::Histogram& commit_duration_;
  prometheus::Histogram& commit_operations_;
  prometheus::Gauge& collections_;
  prometheus::Family<prometheus::Counter>& denied_;
  prometheus::Gauge& collection_max_share_;
  prometheus::Family<prometheus::Counter>& creations_refused_;
  prometheus::Counter* refused_for_count_;
  prometheus::Counter* refused_for_rate_;
  prometheus::Counter* refused_for_identity_rate_;
  prometheus::Counter& audit_lines_suppressed_;
  prometheus::Counter& history_rewinds_;
  prometheus::Counter& history_collections_moved_;
  prometheus::Counter& history_numbers_skipped_;

  std::atomic<prometheus::Counter*> request_series_[2][kRequestCodes] = {};
  prometheus::Family<prometheus::Counter>& log_lines_dropped_;
  prometheus::Counter* audit_lines_dropped_;
  prometheus::Counter* stderr_lines_dropped_;

  base::Mutex mu_;
  absl::flat_hash_map<std::string, CollectionSeries> by_collection_
      ABSL_GUARDED_BY(mu_);
  // Collections counted from their first number, which never get a label
  // (at most kMaxUnlabelledCollections; past that no collection gets a new
  // label, as past max_collections).
  absl::flat_hash_set<std::string> unlabelled_ ABSL_GUARDED_BY(mu_);
  bool labels_closed_ ABSL_GUARDED_BY(mu_) = false;
  // The series of every collection without a label of its own, once made:
  // a Family::Add per NextRange is a label look-up under the family's lock.
  prometheus::Counter* other_ids_reserved_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t highest_max_ ABSL_GUARDED_BY(mu_) = 0;
};

// Serves a registry at http://<address>/metrics.
class MetricsEndpoint {
 public:
  // UNAVAILABLE naming the address if it cannot be bound.
  // `threads` workers serve requests; one whose bytes do not all arrive
  // within `request_timeout` is dropped, so slow clients cannot hold them.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address,
      std::shared_ptr<prometheus::Registry> registry, int threads = 8,
      absl::Duration request_timeout = absl::Seconds(2));
  ~MetricsEndpoint();

  // The bound TCP port (useful with port 0).
  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  int port_ = 0;
  // Where the destructor connects to wake CivetWeb's listening thread.
  std::string wake_host_;
};

namespace internal {
// The numeric host a client on this machine reaches an endpoint bound to
// `address` ("127.0.0.1:0", "0.0.0.0:9464", "[::]:9464", "9464") at:
// the address itself, or loopback for a wildcard or a port alone.
std::string MetricsWakeHost(absl::string_view address);
}  // namespace internal

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_METRICS_H_
