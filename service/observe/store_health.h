// StoreHealth: whether the store can write, for the health service.
//
// A store that fails its writes for want of space (RESOURCE_EXHAUSTED that
// is not a refusal of a new collection: SQLite's SQLITE_FULL, PostgreSQL's
// disk full) answers every NextRange with an error; health saying SERVING
// meanwhile kept load balancers sending calls there (issue 36 item 7). A
// failed write makes the store unhealthy; a commit that succeeds makes it
// healthy again, and so does free space on the database's file system
// (`space_dir`, checked every `interval` while unhealthy): a node that load
// balancers stopped sending calls to must come back by itself once space
// does. If the next commit still fails, it is unhealthy again.
//
//   StoreHealth health({.space_dir = "/var/lib/hilo",
//                       .on_change = [&](bool ok) { UpdateHealth(); }});
//   observers.push_back(&health);   // sees every call's outcome
//   on_commit = [&] { health.OnCommit(); };
//
// Thread-safe.
#ifndef HILO_SERVICE_OBSERVE_STORE_HEALTH_H_
#define HILO_SERVICE_OBSERVE_STORE_HEALTH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"
#include "service/observe/observer.h"

namespace hilo {

struct StoreHealthOptions {
  // The directory of the database file; empty: no space check (a shared
  // store's disk is not this machine's).
  std::string space_dir;
  // Free bytes that count as space again: a commit writes a few pages of
  // WAL per operation (a batch of 256 operations, about 300 KB).
  int64_t min_free_bytes = 1 << 20;
  absl::Duration interval = absl::Seconds(1);
  // Called with the new state when it changes, outside any lock of this.
  std::function<void(bool healthy)> on_change;
};

class StoreHealth final : public Observer {
 public:
  explicit StoreHealth(StoreHealthOptions options);
  // Stops the space check (waits at most one statvfs).
  ~StoreHealth() override;

  StoreHealth(const StoreHealth&) = delete;
  StoreHealth& operator=(const StoreHealth&) = delete;

  bool healthy() const;
  // A commit succeeded.
  void OnCommit();

  void OnNextRange(absl::string_view, const absl::Status& status, const Range*,
                   absl::Duration) override {
    Saw(status);
  }
  void OnReturnRange(absl::string_view, const absl::Status& status,
                     const ReturnOutcome*, absl::Duration) override {
    Saw(status);
  }
  void OnSetFloor(absl::string_view, const absl::Status& status,
                  const FloorOutcome*) override {
    Saw(status);
  }

 private:
  // Whether `status` says the store is out of space.
  static bool IsFull(const absl::Status& status);
  void Saw(const absl::Status& status);
  void Set(bool healthy);
  void CheckSpace();

  const StoreHealthOptions options_;
  mutable base::Mutex mu_;
  bool healthy_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread space_check_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_STORE_HEALTH_H_
