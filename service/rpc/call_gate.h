// CallGate: counts the calls that have reached the services, and closes to
// let a stopping process know that none is left and none will come.
//
// gRPC's Shutdown returns only once it has torn down every call it
// cancelled at the end of the grace period, which after an HTTP/2 rapid
// reset can take it seconds of CPU (tens of thousands of reset streams)
// although none of those calls reaches the store any more. A process that
// must stop within its grace closes the gate instead: from then on calls
// are refused before they reach a service, and Close returns once the calls
// already in the services have ended, so nothing is left half done in the
// store when the process exits.
//
//   if (!gate.Enter()) return Refuse();  // closed: the server is stopping
//   ... the call runs; when it has ended: gate.Leave();
//   gate.Close();  // elsewhere: returns once every entered call has left
//
// Enter and Leave cost one atomic operation each while the gate is open.
// Thread-safe.
#ifndef HILO_SERVICE_RPC_CALL_GATE_H_
#define HILO_SERVICE_RPC_CALL_GATE_H_

#include <atomic>
#include <cstdint>

#include "hilo/base/mutex.h"

namespace hilo {

class CallGate {
 public:
  CallGate() = default;
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // True if the call may go on (then Leave must follow, once, when it has
  // ended); false once Close has begun.
  bool Enter();
  // The end of a call Enter let through.
  void Leave();
  // Refuses every later Enter and returns once every call that entered has
  // left. Idempotent.
  void Close();
  // How many calls are past Enter now (a refused Enter may count for a
  // moment): for a line that says what a stopping process waits for.
  int64_t inside() const {
    return static_cast<int64_t>(state_.load(std::memory_order_relaxed) /
                                kOneCall);
  }

 private:
  static constexpr uint64_t kOneCall = 2;
  // Twice the calls in, plus one once closed.
  std::atomic<uint64_t> state_{0};
  // Only for Close's wait: the last Leave after Close wakes it.
  base::Mutex mu_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_CALL_GATE_H_
