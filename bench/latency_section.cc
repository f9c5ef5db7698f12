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

struct LatencyRun {
  std::string label;
  int64_t calls = 0;
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;
  int64_t waited = 0;        // ClientStats::calls_waited
  int64_t waited_100us = 0;  // calls that took >= 100 µs
  int64_t waited_1ms = 0;    // calls that took >= 1 ms
  int64_t fetches = 0;       // NextRange calls through the proxy
  LatencyHistogram latency;
};

// One client, `threads` threads calling NextId(collection) flat out for
// `duration`, each call timed.
LatencyRun DrawFlatOut(hilo::Client* client, const std::string& collection,
                       int threads, absl::Duration duration) {
  std::vector<LatencyRun> per_thread(threads);
  const Clock::time_point end =
      Clock::now() + absl::ToChronoNanoseconds(duration);
  const Clock::time_point begin = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      LatencyRun& run = per_thread[t];
      Clock::time_point now = Clock::now();
      while (now < end) {
        const Clock::time_point start = now;
        absl::StatusOr<hilo::Id> id = client->NextId(collection);
        now = Clock::now();
        const int64_t nanos = NanosSince(start, now);
        run.latency.Record(nanos);
        ++run.calls;
        if (nanos >= 100000) ++run.waited_100us;
        if (nanos >= 1000000) ++run.waited_1ms;
        if (!id.ok() && run.errors++ == 0) {
          run.first_error = id.status().ToString();
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  LatencyRun total;
  total.seconds = NanosSince(begin, Clock::now()) / 1e9;
  for (const LatencyRun& run : per_thread) {
    total.calls += run.calls;
    total.errors += run.errors;
    if (total.first_error.empty()) total.first_error = run.first_error;
    total.waited_100us += run.waited_100us;
    total.waited_1ms += run.waited_1ms;
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

}  // namespace

absl::Status RunLatency(BenchRun& bench) {
  const BenchOptions& o = bench.options();
  std::string& md = bench.markdown();
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
  for (double prefetch : {0.0, o.prefetch_at}) {
    hilo::ClientOptions options;
    options.targets = {absl::StrCat("127.0.0.1:", proxy_port)};
    options.prefetch_at = prefetch;
    const std::string label =
        prefetch == 0 ? std::string("off (prefetch_at = 0)")
                      : absl::StrFormat("on (prefetch_at = %g)", prefetch);
    absl::StatusOr<std::unique_ptr<hilo::Client>> client =
        hilo::Client::Create(options);
    if (!client.ok()) return client.status();
    const int64_t fetches_before = proxy.next_range_calls();
    LatencyRun run = DrawFlatOut(client->get(), "latency", o.latency_threads,
                                 o.latency_duration);
    run.fetches = proxy.next_range_calls() - fetches_before;
    run.waited = (*client)->stats().calls_waited;
    run.label = label;
    client->reset();  // returns the unused tail through the proxy
    bench.Check(absl::StrCat("client latency, prefetch ", label), run.errors,
                run.first_error);
    absl::FPrintF(stderr,
                  "hilo_bench: client latency, prefetch %s: %d calls, %d "
                  "waited, %d >= 100 µs, %d >= 1 ms, %d fetches, p99.9 %s\n",
                  label, run.calls, run.waited, run.waited_100us,
                  run.waited_1ms, run.fetches,
                  Duration(run.latency.Percentile(0.999)));
    runs.push_back(std::move(run));
  }
  proxy_server->Shutdown(std::chrono::system_clock::now());

  absl::StrAppendFormat(
      &md,
      "\n### Client with %s added server latency\n\n"
      "`hilo::Client` → in-process proxy (a `HiLo::Service` that sleeps %s, "
      "then forwards over loopback) → `hilo_server` (defaults). %d threads "
      "call `NextId(\"latency\")` flat out for %s from a cold start (the "
      "first range holds 32 numbers; ranges double up to 1,048,576), each "
      "call timed with `steady_clock` (a timer pair costs %d ns here, "
      "included below). *Waited*: calls that waited for a range from the "
      "server, as the client counts them (`ClientStats::calls_waited`). "
      "*≥ 100 µs* and *≥ 1 ms*: calls that took that long for any reason, "
      "waiting or being descheduled (a wait costs about %s; the fast path "
      "well under 1 µs). *Fetches*: NextRange calls through the proxy.\n\n"
      "| prefetch | calls | calls/s | fetches | waited | ≥ 100 µs | ≥ 1 ms "
      "| p50 | p99 | p99.9 | p99.99 | max | target: waited < 0.1%% |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n",
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
        "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
        run.label, Thousands(run.calls),
        Thousands(static_cast<int64_t>(run.calls / run.seconds)), run.fetches,
        share(run.waited), share(run.waited_100us), share(run.waited_1ms),
        Duration(run.latency.Percentile(0.5)),
        Duration(run.latency.Percentile(0.99)),
        Duration(run.latency.Percentile(0.999)),
        Duration(run.latency.Percentile(0.9999)), Duration(run.latency.max()),
        met ? "yes" : "**no**");
  }
  return StopServer(**server);
}

}  // namespace hilo::bench
