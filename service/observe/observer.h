// Observer: what the HiLo service reports about each call it finishes.
//
// Metrics implement it to count and time requests; tests implement it to see
// every range a node issued.
#ifndef HILO_SERVICE_OBSERVE_OBSERVER_H_
#define HILO_SERVICE_OBSERVE_OBSERVER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/range_store.h"

namespace hilo {

// Called on gRPC threads, concurrently; implementations are thread-safe and
// quick. `collection` may be any bytes when the status is INVALID_ARGUMENT.
class Observer {
 public:
  virtual ~Observer() = default;

  // A NextRange call ended. `range` is set when `status` is OK.
  virtual void OnNextRange(absl::string_view collection,
                           const absl::Status& status, const Range* range,
                           absl::Duration elapsed) = 0;

  // A ReturnRange call ended. `outcome` is set when `status` is OK.
  virtual void OnReturnRange(absl::string_view collection,
                             const absl::Status& status,
                             const ReturnOutcome* outcome,
                             absl::Duration elapsed) = 0;

  // A SetFloor call ended. `outcome` is set when `status` is OK.
  virtual void OnSetFloor(absl::string_view collection,
                          const absl::Status& status,
                          const FloorOutcome* outcome) {}

  // A call was refused before it reached the store: `reason` is
  // "permission" (the authorization policy) or "guard_rail" (a last_max
  // too far above Max, refused by the store). `method` is the RPC's name.
  virtual void OnDenied(absl::string_view method, absl::string_view reason) {}
};

// Forwards each call to every observer in a list, in order.
class ObserverList final : public Observer {
 public:
  // Null entries are skipped. The observers must outlive the list.
  explicit ObserverList(std::vector<Observer*> observers) {
    for (Observer* o : observers) {
      if (o != nullptr) observers_.push_back(o);
    }
  }

  void OnNextRange(absl::string_view collection, const absl::Status& status,
                   const Range* range, absl::Duration elapsed) override {
    for (Observer* o : observers_) {
      o->OnNextRange(collection, status, range, elapsed);
    }
  }
  void OnReturnRange(absl::string_view collection, const absl::Status& status,
                     const ReturnOutcome* outcome,
                     absl::Duration elapsed) override {
    for (Observer* o : observers_) {
      o->OnReturnRange(collection, status, outcome, elapsed);
    }
  }
  void OnSetFloor(absl::string_view collection, const absl::Status& status,
                  const FloorOutcome* outcome) override {
    for (Observer* o : observers_) o->OnSetFloor(collection, status, outcome);
  }
  void OnDenied(absl::string_view method, absl::string_view reason) override {
    for (Observer* o : observers_) o->OnDenied(method, reason);
  }

 private:
  std::vector<Observer*> observers_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_OBSERVER_H_
