// FlushCeiling: what durable writes cost one at a time on this disk, the
// ceiling hilo_bench sets the server's throughput against.
//
//   absl::StatusOr<LoadResult> r = FlushCeiling(dir + "/flush.db",
//                                               warmup, window);
#ifndef HILO_BENCH_FLUSH_CEILING_H_
#define HILO_BENCH_FLUSH_CEILING_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/closed_loop.h"

namespace hilo::bench {

// Single-row durable commits, one transaction each (BEGIN IMMEDIATE; upsert
// of one row of 100; COMMIT), on one connection to a fresh database at
// `path` in WAL mode with synchronous=FULL: every COMMIT fsyncs the WAL, as
// the server's do. Nothing is batched. Runs `warmup` unmeasured, then
// `window` measured. UNAVAILABLE if the file cannot be opened;
// FAILED_PRECONDITION if WAL cannot be enabled; INTERNAL if SQLite fails.
absl::StatusOr<LoadResult> FlushCeiling(const std::string& path,
                                        absl::Duration warmup,
                                        absl::Duration window);

}  // namespace hilo::bench

#endif  // HILO_BENCH_FLUSH_CEILING_H_
