#include "client_cpp/src/fork_guard.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

namespace hilo::internal {
namespace {

// Never destroyed: a fork may come while static objects are torn down.
struct Registry {
  std::mutex mu;
  std::vector<ForkAware*> objects;  // guarded by mu
};

Registry& TheRegistry() {
  static Registry* const registry = new Registry;
  return *registry;
}

std::atomic<uint64_t> fork_generation{0};

// Held from Prepare to the end of InParent or InChild, so that no object
// registers, unregisters or is destroyed while a fork is under way.
void Prepare() {
  Registry& registry = TheRegistry();
  registry.mu.lock();
  for (ForkAware* object : registry.objects) object->BeforeFork();
}

void InParent() {
  Registry& registry = TheRegistry();
  for (auto it = registry.objects.rbegin(); it != registry.objects.rend();
       ++it) {
    (*it)->AfterForkInParent();
  }
  registry.mu.unlock();
}

void InChild() {
  Registry& registry = TheRegistry();
  fork_generation.fetch_add(1, std::memory_order_relaxed);
  for (auto it = registry.objects.rbegin(); it != registry.objects.rend();
       ++it) {
    (*it)->AfterForkInChild();
  }
  // This thread took it in Prepare and is the only thread left.
  registry.mu.unlock();
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(&Prepare, &InParent, &InChild); });
}

}  // namespace

void RegisterForFork(ForkAware* object) {
  InstallOnce();
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.objects.push_back(object);
}

void UnregisterForFork(ForkAware* object) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.objects.erase(
      std::remove(registry.objects.begin(), registry.objects.end(), object),
      registry.objects.end());
}

uint64_t ForkGeneration() {
  return fork_generation.load(std::memory_order_relaxed);
}

void SimulateForkInChildForTesting() {
  Prepare();
  InChild();
}

}  // namespace hilo::internal
