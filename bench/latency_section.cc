#include <sys/resource.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/closed_loop.h"
#include "bench/delaying_proxy.h"
#include "bench/latency_histogram.h"
#include "bench/report_format.h"
#include "bench/rpc_calls.h"
#include "bench/sections.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "hilo/client.h"

namespace hilo::bench {
namespace {

// What each timed call of a run does.
enum class CallKind {
  kNextId,          // Client::NextId(collection)
  kHandleNextId,    // CollectionHandle::NextId(), the handle made once
  kNextDocumentId,  // Client::NextDocumentId(collection)
  kNothing,         // no call: the two timer reads alone, so the run shows
                    // the pauses the machine itself adds to any code
};

struct LatencyRun {
  std::string label;
  std::string call;
  int64_t calls = 0;
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;
  int64_t waited = 0;        // ClientStats::calls_waited
  int64_t slow_1us = 0;      // calls that took >= 1 µs
  int64_t waited_100us = 0;  // calls that took >= 100 µs
  int64_t waited_1ms = 0;    // calls that took >= 1 ms
  int64_t fetches = 0;       // NextRange calls through the proxy
  int64_t preempted = 0;     // involuntary context switches of the drawers
  int64_t interrupts = 0;    // interrupts of the whole machine (/proc/stat)
  LatencyHistogram latency;
};

// Involuntary context switches of the calling thread so far.
int64_t ThreadPreemptions() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nivcsw;
}

// Interrupts of every CPU since boot (the first figure of /proc/stat's
// "intr" line, timer and IPIs included); 0 if unreadable.
int64_t MachineInterrupts() {
  std::ifstream stat("/proc/stat");
  std::string word;
  while (stat >> word) {
    if (word == "intr") {
      int64_t total = 0;
      stat >> total;
      return total;
    }
  }
  return 0;
}

// One thread's share of a run: `call` timed flat out until `end`.
template <typename Call>
void DrawUntil(Clock::time_point end, Call call, LatencyRun& run) {
  const int64_t preempted_before = ThreadPreemptions();
  Clock::time_point now = Clock::now();
  while (now < end) {
    const Clock::time_point start = now;
    absl::Status status = call();
    now = Clock::now();
    const int64_t nanos = NanosSince(start, now);
    run.latency.Record(nanos);
    ++run.calls;
    if (nanos >= 1000) {
      ++run.slow_1us;
      if (nanos >= 100000) ++run.waited_100us;
      if (nanos >= 1000000) ++run.waited_1ms;
    }
    if (!status.ok() && run.errors++ == 0) {
      run.first_error = status.ToString();
    }
  }
  run.preempted = ThreadPreemptions() - preempted_before;
}

// One client, `threads` threads making `kind` calls on `collection` flat
// out for `duration`, each call timed.
LatencyRun DrawFlatOut(hilo::Client* client, const std::string& collection,
                       CallKind kind, int threads, absl::Duration duration) {
  std::vector<LatencyRun> per_thread(threads);
  const Clock::time_point end =
      Clock::now() + absl::ToChronoNanoseconds(duration);
  const int64_t interrupts_before = MachineInterrupts();
  const Clock::time_point begin = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      LatencyRun& run = per_thread[t];
      switch (kind) {
        case CallKind::kNextId:
          DrawUntil(
              end, [&] { return client->NextId(collection).status(); }, run);
          break;
        case CallKind::kHandleNextId: {
          const hilo::CollectionHandle handle = client->Collection(collection);
          DrawUntil(
              end, [&] { return handle.NextId().status(); }, run);
          break;
        }
        case CallKind::kNextDocumentId:
          DrawUntil(
              end, [&] { return client->NextDocumentId(collection).status(); },
              run);
          break;
        case CallKind::kNothing:
          DrawUntil(
              end, [] { return absl::OkStatus(); }, run);
          break;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  LatencyRun total;
  total.seconds = NanosSince(begin, Clock::now()) / 1e9;
  total.interrupts = MachineInterrupts() - interrupts_before;
  for (const LatencyRun& run : per_thread) {
    total.calls += run.calls;
    total.errors += run.errors;
    if (total.first_error.empty()) total.first_error = run.first_error;
    total.slow_1us += run.slow_1us;
    total.waited_100us += run.waited_100us;
    total.waited_1ms += run.waited_1ms;
    total.preempted += run.preempted;
    total.latency.Merge(run.latency);
  }
  return total;
}

// Median cost of one Clock::now() pair, which every timed call includes.
int64_t TimerOverheadNanos() {
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    const Clock::time_point a = Clock::now();
    const Clock::time_point b = Clock::now();
    h.Record(NanosSince(a, b));
  }
  return h.Percentile(0.5);
}

// One row of the table: a fresh client (prefetch_at `prefetch`; none for
// CallKind::kNothing) drawing from `collection` through the proxy at
// `proxy_port`.
absl::StatusOr<LatencyRun> MeasureOne(BenchRun& bench, DelayingProxy& proxy,
                                      int proxy_port, CallKind kind,
                                      double prefetch) {
  const BenchOptions& o = bench.options();
  LatencyRun run;
  run.call = kind == CallKind::kNextId           ? "NextId"
             : kind == CallKind::kHandleNextId   ? "CollectionHandle::NextId"
             : kind == CallKind::kNextDocumentId ? "NextDocumentId"
                                                 : "none";
  run.label =
      kind == CallKind::kNothing
          ? std::string("no call: two timer reads (the machine's pauses)")
          : absl::StrFormat(
                "`%s`, prefetch %s", run.call,
                prefetch == 0 ? "off" : absl::StrFormat("%g", prefetch));
  hilo::ClientOptions options;
  options.targets = {absl::StrCat("127.0.0.1:", proxy_port)};
  options.prefetch_at = prefetch;
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) return client.status();
  const std::string collection = absl::StrCat(
      "latency_", static_cast<int>(kind), "_", prefetch == 0 ? "off" : "on");
  const int64_t fetches_before = proxy.next_range_calls();
  LatencyRun drawn = DrawFlatOut(client->get(), collection, kind,
                                 o.latency_threads, o.latency_duration);
  drawn.call = run.call;
  drawn.label = run.label;
  run = std::move(drawn);
  run.fetches = proxy.next_range_calls() - fetches_before;
  run.waited = (*client)->stats().calls_waited;
  client->reset();  // returns the unused tail through the proxy
  bench.Check(absl::StrCat("client latency, ", run.label), run.errors,
              run.first_error);
  // One line per run in the shape every language's latency benchmark
  // prints (bench/client_latency.sh gathers them), times in nanoseconds.
  absl::FPrintF(stderr,
                "RESULT lang=C++ call=%s prefetch=%s threads=%d calls=%d "
                "waited=%d p50=%d p99=%d p999=%d p9999=%d max=%d "
                "slow_1us=%d preempted=%d interrupts=%d seconds=%.3f\n",
                run.call, prefetch == 0 ? "off" : "on", o.latency_threads,
                run.calls, run.waited, run.latency.Percentile(0.5),
                run.latency.Percentile(0.99), run.latency.Percentile(0.999),
                run.latency.Percentile(0.9999), run.latency.max(), run.slow_1us,
                run.preempted, run.interrupts, run.seconds);
  return run;
}

void AppendLatencyTable(const BenchOptions& o, int64_t timer,
                        const std::vector<LatencyRun>& runs, std::string& md) {
  absl::StrAppendFormat(
      &md,
      "\n### Client with %s added server latency\n\n"
      "`hilo::Client` → in-process proxy (a `HiLo::Service` that sleeps %s, "
      "then forwards over loopback) → `hilo_server` (defaults). %d threads "
      "call the client flat out for %s each row, on a collection of their "
      "own from a cold start (the first range holds 32 numbers; ranges "
      "double up to 1,048,576), each call timed with `steady_clock` (a "
      "timer pair costs %d ns here, included below). The last row times "
      "nothing but the timer pair in the same loop: what the machine "
      "(interrupts, preemption, the hypervisor) adds to any code. *Waited*: "
      "calls that waited for a range from the server, as the client counts "
      "them (`ClientStats::calls_waited`). *≥ 1 µs* ... *≥ 1 ms*: calls that "
      "took that long for any reason (a wait costs about %s; the fast path "
      "well under 1 µs). *Preempted*: involuntary context switches of the "
      "drawing threads; *interrupts/s*: of the whole machine, every CPU, "
      "during the row. *Fetches*: NextRange calls through the proxy.\n\n"
      "| calls made | calls | calls/s | fetches | waited | ≥ 1 µs | ≥ 100 µs "
      "| ≥ 1 ms | preempted | interrupts/s | p50 | p99 | p99.9 | p99.99 "
      "| max | target: waited < 0.1%% |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---:|:---:|\n",
      absl::FormatDuration(o.added_latency),
      absl::FormatDuration(o.added_latency), o.latency_threads,
      absl::FormatDuration(o.latency_duration), timer,
      absl::FormatDuration(o.added_latency));
  for (const LatencyRun& run : runs) {
    auto share = [&](int64_t n) {
      return absl::StrFormat("%s (%.4f%%)", Thousands(n),
                             run.calls > 0 ? 100.0 * n / run.calls : 0.0);
    };
    const bool met = run.calls > 0 && 100.0 * run.waited / run.calls < 0.1;
    absl::StrAppendFormat(
        &md,
        "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s "
        "| %s | %s | %s |\n",
        run.label, Thousands(run.calls),
        Thousands(static_cast<int64_t>(run.calls / run.seconds)), run.fetches,
        share(run.waited), share(run.slow_1us), share(run.waited_100us),
        share(run.waited_1ms), Thousands(run.preempted),
        Thousands(static_cast<int64_t>(run.interrupts / run.seconds)),
        Duration(run.latency.Percentile(0.5)),
        Duration(run.latency.Percentile(0.99)),
        Duration(run.latency.Percentile(0.999)),
        Duration(run.latency.Percentile(0.9999)), Duration(run.latency.max()),
        run.call == "none" ? "—" : (met ? "yes" : "**no**"));
  }
}

}  // namespace

absl::Status RunLatency(BenchRun& bench) {
  const BenchOptions& o = bench.options();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      bench.StartServer("latency", {});
  if (!server.ok()) return server.status();
  DelayingProxy proxy(MakeChannels((*server)->port(), 1)[0], o.added_latency);
  grpc::ServerBuilder builder;
  int proxy_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &proxy_port);
  builder.RegisterService(&proxy);
  std::unique_ptr<grpc::Server> proxy_server = builder.BuildAndStart();
  if (proxy_server == nullptr || proxy_port == 0) {
    return absl::UnavailableError("the delaying proxy cannot bind 127.0.0.1:0");
  }

  const int64_t timer = TimerOverheadNanos();
  std::vector<LatencyRun> runs;
  const std::pair<CallKind, double> rows[] = {
      {CallKind::kNextId, 0.0},
      {CallKind::kNextId, o.prefetch_at},
      {CallKind::kHandleNextId, o.prefetch_at},
      {CallKind::kNextDocumentId, o.prefetch_at},
      {CallKind::kNothing, o.prefetch_at},
  };
  for (const auto& [kind, prefetch] : rows) {
    absl::StatusOr<LatencyRun> run =
        MeasureOne(bench, proxy, proxy_port, kind, prefetch);
    if (!run.ok()) return run.status();
    runs.push_back(*std::move(run));
  }
  proxy_server->Shutdown(std::chrono::system_clock::now());
  AppendLatencyTable(o, timer, runs, bench.markdown());
  return StopServer(**server);
}

}  // namespace hilo::bench
