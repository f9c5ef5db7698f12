// The three sections of a hilo_bench run. Each measures, appends its
// Markdown tables to run.markdown() (throughput also its series to
// run.data()) and stops every server it started. Failed calls go to
// run.Check; an error is returned only for a failure that stops the run.
//
//   BenchRun run(options, dir);
//   absl::Status s = RunThroughput(run);
#ifndef HILO_BENCH_SECTIONS_H_
#define HILO_BENCH_SECTIONS_H_

#include "absl/status/status.h"
#include "bench/bench_run.h"

namespace hilo::bench {

// 1. Server throughput: NextRange at each options().in_flight over
//    loopback, on 1 and on many collections, beside the no-op RPC,
//    NextRange with --max_batch=1 and the flush ceiling; with latency and
//    CPU per request, and the targets at 64 in flight.
absl::Status RunThroughput(BenchRun& run);

// 2. Client latency: hilo::Client behind a DelayingProxy, IDs drawn flat
//    out, prefetch off and on; how many calls waited, and percentiles.
absl::Status RunLatency(BenchRun& run);

// 3. Memory: the server's resident set with many collections, and the
//    client's heap per cached collection.
absl::Status RunMemory(BenchRun& run);

}  // namespace hilo::bench

#endif  // HILO_BENCH_SECTIONS_H_
