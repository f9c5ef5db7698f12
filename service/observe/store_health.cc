#include "service/observe/store_health.h"

#include <sys/statvfs.h>

#include <utility>

#include "service/access/collection_limit.h"

namespace hilo {

StoreHealth::StoreHealth(StoreHealthOptions options)
    : options_(std::move(options)) {
  if (!options_.space_dir.empty()) {
    space_check_ = std::thread([this] { CheckSpace(); });
  }
}

StoreHealth::~StoreHealth() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (space_check_.joinable()) space_check_.join();
}

bool StoreHealth::healthy() const {
  base::MutexLock lock(&mu_);
  return healthy_;
}

void StoreHealth::OnCommit() { Set(true); }

bool StoreHealth::IsFull(const absl::Status& status) {
  // The services refuse new collections with RESOURCE_EXHAUSTED too; those
  // carry their reason.
  return status.code() == absl::StatusCode::kResourceExhausted &&
         CollectionRefusalReason(status).empty();
}

void StoreHealth::Saw(const absl::Status& status) {
  if (IsFull(status)) Set(false);
}

void StoreHealth::Set(bool healthy) {
  {
    base::MutexLock lock(&mu_);
    if (healthy_ == healthy) return;
    healthy_ = healthy;
  }
  if (options_.on_change) options_.on_change(healthy);
}

void StoreHealth::CheckSpace() {
  for (;;) {
    {
      base::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
          options_.interval);
      if (stopping_) return;
      if (healthy_) continue;
    }
    struct statvfs fs;
    if (::statvfs(options_.space_dir.c_str(), &fs) == 0 &&
        static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize) >=
            options_.min_free_bytes) {
      Set(true);
    }
  }
}

}  // namespace hilo
