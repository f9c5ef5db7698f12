// What /proc says about a process: its memory and its CPU time, for the
// load tool's tables.
#ifndef HILO_BENCH_PROC_STATS_H_
#define HILO_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>

namespace hilo::bench {

// Resident set size now (VmRSS), and its peak (VmHWM), from
// /proc/<pid>/status; -1 if it cannot be read.
int64_t RssBytes(pid_t pid);
int64_t PeakRssBytes(pid_t pid);

// Threads of `pid` now (Threads in /proc/<pid>/status); -1 if it cannot be
// read.
int64_t ThreadCount(pid_t pid);

// CPU time (user + system) `pid` has used so far, in seconds; -1 if it
// cannot be read.
double CpuSeconds(pid_t pid);

// Context switches (voluntary + involuntary) of all of `pid`'s threads now
// alive, summed over /proc/<pid>/task/*/status; -1 if none can be read.
// Threads that ended took their counts with them.
int64_t ContextSwitches(pid_t pid);

}  // namespace hilo::bench

#endif  // HILO_BENCH_PROC_STATS_H_
