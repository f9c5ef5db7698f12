#include "service/rpc/call_gate.h"

namespace hilo {
namespace {
constexpr uint64_t kClosed = 1;
}  // namespace

bool CallGate::Enter() {
  if ((state_.fetch_add(kOneCall) & kClosed) == 0) return true;
  Leave();
  return false;
}

void CallGate::Leave() {
  // The last call out of a closed gate: Close waits for exactly this.
  if (state_.fetch_sub(kOneCall) == (kOneCall | kClosed)) {
    base::MutexLock lock(&mu_);  // the Unlock wakes Close
  }
}

void CallGate::Close() {
  state_.fetch_or(kClosed);
  base::MutexLock lock(&mu_);
  mu_.Await([this] { return state_.load() == kClosed; });
}

}  // namespace hilo
