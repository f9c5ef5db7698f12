// RecordingObserver: remembers every range a node issued, for tests that
// check the IDs clients handed out against them.
#ifndef HILO_TESTING_RECORDING_OBSERVER_H_
#define HILO_TESTING_RECORDING_OBSERVER_H_

#include <map>
#include <string>
#include <vector>

#include "hilo/base/mutex.h"
#include "service/observe/observer.h"

namespace hilo::testing_util {

class RecordingObserver final : public Observer {
 public:
  void OnNextRange(absl::string_view collection, const absl::Status& status,
                   const Range* range, absl::Duration) override {
    if (range == nullptr) return;
    base::MutexLock lock(&mu_);
    issued_[std::string(collection)].push_back(*range);
  }
  void OnReturnRange(absl::string_view, const absl::Status&,
                     const ReturnOutcome*, absl::Duration) override {}

  std::map<std::string, std::vector<Range>> issued() {
    base::MutexLock lock(&mu_);
    return issued_;
  }

 private:
  base::Mutex mu_;
  std::map<std::string, std::vector<Range>> issued_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_RECORDING_OBSERVER_H_
