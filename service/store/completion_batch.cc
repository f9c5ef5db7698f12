#include "service/store/completion_batch.h"

#include <cstdio>
#include <cstdlib>

#include "absl/algorithm/container.h"

namespace hilo {
namespace {

thread_local CompletionBatch* current_batch = nullptr;

}  // namespace

CompletionBatch::CompletionBatch() {
  if (current_batch != nullptr) {
    std::fprintf(stderr,
                 "CompletionBatch opened inside another on the same thread\n");
    std::abort();
  }
  current_batch = this;
}

CompletionBatch::~CompletionBatch() {
  // No longer current first: a listener that replies now replies alone.
  current_batch = nullptr;
  for (Listener* listener : listeners_) listener->OnBatchEnd(*this);
}

CompletionBatch* CompletionBatch::Current() { return current_batch; }

void CompletionBatch::Join(Listener* listener) {
  if (absl::c_find(listeners_, listener) == listeners_.end()) {
    listeners_.push_back(listener);
  }
}

}  // namespace hilo
