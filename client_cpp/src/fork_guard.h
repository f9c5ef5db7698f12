// ForkGuard: what the client does when its process forks.
//
// A child of fork() starts with a copy of everything the parent held: its
// ranges, its gRPC channels, its mutexes (some held by threads the child
// does not have). If the child handed out numbers of a range it inherited,
// parent and child would both hand out orders/2-A; if it returned such a
// range, a third client would be given numbers the parent still hands out
// (CONTRACT.md R16). So every Client registers a ForkAware here, and
// pthread_atfork handlers (installed once, by the first registration) do
// this around each fork():
//
//   before:           BeforeFork of each object, in registration order
//                     (each takes the locks that guard what it holds, so
//                     no other thread is half-way through changing it);
//   in the parent:    AfterForkInParent, in reverse order (lets them go);
//   in the child:     ForkGeneration() goes up by one, then
//                     AfterForkInChild, in reverse order: each object
//                     drops what it inherited without handing it back,
//                     makes its mutexes fresh (their waiters were the
//                     parent's threads) and forgets the parent's threads.
//
// Nothing on the path of a number changes: the child's first call finds
// its range retired and asks its source, which in a child refuses at once
// (ForkSafeSource: gRPC's C++ core does not survive fork()).
//
// Thread-safe. The handlers run inside fork(); a ForkAware must not fork
// from BeforeFork, nor register or unregister from any of the three.
#ifndef HILO_CLIENT_CPP_SRC_FORK_GUARD_H_
#define HILO_CLIENT_CPP_SRC_FORK_GUARD_H_

#include <cstdint>

namespace hilo::internal {

class ForkAware {
 public:
  virtual ~ForkAware() = default;
  virtual void BeforeFork() = 0;
  virtual void AfterForkInParent() = 0;
  virtual void AfterForkInChild() = 0;
};

// Registers `object` (until UnregisterForFork) for the handlers above.
void RegisterForFork(ForkAware* object);
// After it returns, no handler runs on `object` any more.
void UnregisterForFork(ForkAware* object);

// How many forks lie between the process that started and this one: 0 in
// the process that started, one more in each child. A relaxed load.
uint64_t ForkGeneration();

// Test hook: runs the handlers as fork() would, in this process (as the
// parent's before, then the child's after), so that a test can look at a
// child's state without forking a process that holds gRPC threads.
void SimulateForkInChildForTesting();

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_FORK_GUARD_H_
