// CompletionBatch: the outcomes a thread hands out together, and what
// waits for the last of them.
//
// GroupCommit runs the completions of a committed batch one after another
// on its thread. Something a completion starts may do better once for the
// whole batch than once per completion: the gRPC layer holds a
// connection's replies back until the batch's last one is written, so they
// leave together (ReplyCoalescer). CompletionBatch is how a
// completion learns that it runs inside such a batch, and how it asks to
// hear when the batch ends.
//
//   {
//     CompletionBatch batch;            // this thread now runs a batch
//     for (Operation* op : ops) op->done(...);  // may Join(listener)
//   }                                   // each listener's OnBatchEnd, once
//
// A batch belongs to the thread that made it; nested ones are not allowed
// (the inner would end the outer's work early). Not copyable or movable.
#ifndef HILO_SERVICE_STORE_COMPLETION_BATCH_H_
#define HILO_SERVICE_STORE_COMPLETION_BATCH_H_

#include "absl/container/inlined_vector.h"

namespace hilo {

class CompletionBatch {
 public:
  // Told once when the batch it joined ends, on the batch's thread.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void OnBatchEnd(const CompletionBatch& batch) = 0;
  };

  // Makes this the batch of the calling thread, which must have none.
  CompletionBatch();
  // Tells each listener that joined, in the order they first joined.
  ~CompletionBatch();
  CompletionBatch(const CompletionBatch&) = delete;
  CompletionBatch& operator=(const CompletionBatch&) = delete;

  // The batch the calling thread runs, or null.
  static CompletionBatch* Current();

  // `listener` (which must outlive the batch) hears OnBatchEnd when this
  // batch ends; joining again changes nothing.
  void Join(Listener* listener);

 private:
  absl::InlinedVector<Listener*, 2> listeners_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_COMPLETION_BATCH_H_
