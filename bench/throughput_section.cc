#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/closed_loop.h"
#include "bench/flush_ceiling.h"
#include "bench/latency_histogram.h"
#include "bench/report_format.h"
#include "bench/rpc_calls.h"
#include "bench/sections.h"

namespace hilo::bench {

absl::Status RunThroughput(BenchRun& run) {
  const BenchOptions& o = run.options();
  std::string& md = run.markdown();
  std::string& data = run.data();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      run.StartServer("default", {});
  if (!server.ok()) return server.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> unbatched =
      run.StartServer("max_batch_1", {"--max_batch=1"});
  if (!unbatched.ok()) return unbatched.status();
  const auto channels = MakeChannels((*server)->port(), o.channels);
  const auto unbatched_channels =
      MakeChannels((*unbatched)->port(), o.channels);

  std::vector<std::string> many;
  for (int i = 0; i < o.many_collections; ++i) {
    many.push_back(absl::StrFormat("bench-%03d", i));
  }
  auto one_name = [](int64_t) { return std::string("bench-one"); };
  auto many_name = [&many](int64_t seq) { return many[seq % many.size()]; };

  enum Series { kOne, kMany, kUnbatched, kNoop, kSeriesCount };
  const std::string kSeriesName[] = {
      "NextRange, 1 collection",
      absl::StrFormat("NextRange, %d collections", o.many_collections),
      "NextRange, 1 collection, --max_batch=1", "no-op RPC (Health/Check)"};

  // rates[series][level] = one rate per repetition.
  std::vector<std::vector<std::vector<double>>> rates(
      kSeriesCount, std::vector<std::vector<double>>(o.in_flight.size()));
  std::vector<std::vector<LatencyHistogram>> latency(
      kSeriesCount, std::vector<LatencyHistogram>(o.in_flight.size()));
  struct CpuUse {
    int64_t calls = 0;
    double server = 0;  // seconds
    double client = 0;
    int64_t switches = 0;  // the server's context switches
  };
  std::vector<std::vector<CpuUse>> cpu(kSeriesCount,
                                       std::vector<CpuUse>(o.in_flight.size()));
  std::vector<double> flush_rates;
  LatencyHistogram flush_latency;

  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (size_t level = 0; level < o.in_flight.size(); ++level) {
      const int n = o.in_flight[level];
      for (int series = 0; series < kSeriesCount; ++series) {
        LoadResult result;
        if (series == kNoop) {
          HealthCheckCalls calls(channels, n);
          result = ClosedLoop(n, calls.Issuer())
                       .RunTimed(o.warmup, o.duration, **server);
        } else {
          NextRangeCalls calls(
              series == kUnbatched ? unbatched_channels : channels, n,
              series == kMany ? std::function<std::string(int64_t)>(many_name)
                              : one_name);
          result = ClosedLoop(n, calls.Issuer())
                       .RunTimed(o.warmup, o.duration,
                                 series == kUnbatched ? **unbatched : **server);
        }
        run.Check(kSeriesName[series], result.errors, result.first_error);
        rates[series][level].push_back(result.rate());
        latency[series][level].Merge(result.latency);
        cpu[series][level].calls += result.calls;
        cpu[series][level].server += result.server_cpu;
        cpu[series][level].client += result.client_cpu;
        cpu[series][level].switches += result.server_switches;
        absl::FPrintF(stderr,
                      "hilo_bench: run %d/%d, %3d in flight, %-40s %9.0f/s "
                      "(p50 %s; CPU s: server %.2f, here %.2f; server "
                      "context switches per request %.2f)\n",
                      rep + 1, o.repetitions, n, kSeriesName[series],
                      result.rate(), Duration(result.latency.Percentile(0.5)),
                      result.server_cpu, result.client_cpu,
                      static_cast<double>(result.server_switches) /
                          std::max<int64_t>(result.calls, 1));
      }
      // The disk's flush time drifts (a shared virtual disk can vary
      // tenfold within minutes), so the ceiling is sampled beside every
      // level and summarised as one median.
      absl::StatusOr<LoadResult> flush = FlushCeiling(
          absl::StrCat(run.dir(), "/flush_ceiling.db"), o.warmup, o.duration);
      if (!flush.ok()) return flush.status();
      flush_rates.push_back(flush->rate());
      flush_latency.Merge(flush->latency);
      absl::FPrintF(stderr, "hilo_bench: run %d/%d, %-56s %9.0f/s (p50 %s)\n",
                    rep + 1, o.repetitions,
                    "flush ceiling (1 SQLite commit at a time)", flush->rate(),
                    Duration(flush->latency.Percentile(0.5)));
    }
  }

  // Tables.
  absl::StrAppendFormat(
      &md,
      "### Server throughput (requests/s)\n\n"
      "Median of %d runs of %s each, the runs interleaved (± is half the "
      "spread of the runs). Server: `hilo_server` defaults (`--sync=full`, "
      "`--max_batch=256`, metrics on) in its own process; load over %d "
      "loopback connection%s with the gRPC callback API, each NextRange "
      "asking as a new client would (no previous range). Flush ceiling: "
      "one row upserted and committed per transaction, WAL, "
      "`synchronous=FULL`, in the servers' directory; one median of %d "
      "samples, one taken beside each row of each run.\n\n",
      o.repetitions, absl::FormatDuration(o.duration), o.channels,
      o.channels == 1 ? "" : "s", flush_rates.size());
  md += "| in flight |";
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md, " ", kSeriesName[series], " |");
  }
  md += " flush ceiling (1 SQLite commit at a time) |\n|---:|";
  for (int series = 0; series <= kSeriesCount; ++series) md += "---:|";
  md += "\n";
  for (size_t level = 0; level < o.in_flight.size(); ++level) {
    absl::StrAppend(&md, "| ", o.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      absl::StrAppend(&md, " ", RateCell(rates[series][level]), " |");
    }
    absl::StrAppend(&md, " ", RateCell(flush_rates), " |\n");
  }

  absl::StrAppend(&md,
                  "\n### Server latency (p50 / p99 per request, all runs)\n\n"
                  "| in flight |");
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md, " ", kSeriesName[series], " |");
  }
  md += " flush ceiling |\n|---:|";
  for (int series = 0; series <= kSeriesCount; ++series) md += "---:|";
  md += "\n";
  for (size_t level = 0; level < o.in_flight.size(); ++level) {
    absl::StrAppend(&md, "| ", o.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      const LatencyHistogram& h = latency[series][level];
      absl::StrAppend(&md, " ", Duration(h.Percentile(0.5)), " / ",
                      Duration(h.Percentile(0.99)), " |");
    }
    absl::StrAppend(&md, " ", Duration(flush_latency.Percentile(0.5)), " / ",
                    Duration(flush_latency.Percentile(0.99)), " |\n");
  }

  absl::StrAppend(
      &md,
      "\n### CPU per request (µs: server process / load generator, all "
      "runs), and the server's context switches per request\n\n"
      "Both share the machine's cores; at a full machine, requests/s × "
      "(server + load generator) CPU per request ≈ cores × 10⁶. Context "
      "switches: voluntary and involuntary, summed over the server's "
      "threads (`/proc/PID/task/*/status`) across the measured window, "
      "divided by the requests answered in it.\n\n"
      "| in flight |");
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md, " ", kSeriesName[series], " |");
  }
  md += "\n|---:|";
  for (int series = 0; series < kSeriesCount; ++series) md += "---:|";
  md += "\n";
  for (size_t level = 0; level < o.in_flight.size(); ++level) {
    absl::StrAppend(&md, "| ", o.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      const CpuUse& use = cpu[series][level];
      const double calls = std::max<int64_t>(use.calls, 1);
      absl::StrAppendFormat(&md, " %.1f / %.1f µs, %.2f switches |",
                            1e6 * use.server / calls, 1e6 * use.client / calls,
                            use.switches / calls);
    }
    md += "\n";
  }

  // Targets at 64 in flight.
  const auto at = std::find(o.in_flight.begin(), o.in_flight.end(), 64);
  if (at != o.in_flight.end()) {
    const size_t level = at - o.in_flight.begin();
    const double noop = Median(rates[kNoop][level]);
    const double noop_p99 =
        static_cast<double>(latency[kNoop][level].Percentile(0.99));
    const double flush = Median(flush_rates);
    const CpuUse& noop_cpu = cpu[kNoop][level];
    const double noop_server_us =
        1e6 * noop_cpu.server / std::max<int64_t>(noop_cpu.calls, 1);
    absl::StrAppend(
        &md,
        "\n### Targets at 64 in flight\n\n"
        "| ratio (requests/s and p99: medians of the runs; CPU: over "
        "all runs) | measured | target | met |\n"
        "|---|---:|---:|:---:|\n");
    for (int series : {kOne, kMany}) {
      const double nr = Median(rates[series][level]);
      const double vs_noop = noop > 0 ? nr / noop : 0;
      const double vs_flush = flush > 0 ? nr / flush : 0;
      const double p99 =
          static_cast<double>(latency[series][level].Percentile(0.99));
      const double p99_vs_noop = noop_p99 > 0 ? p99 / noop_p99 : 0;
      absl::StrAppendFormat(&md, "| %s ÷ no-op RPC | %s | ≥ 0.80 | %s |\n",
                            kSeriesName[series], Ratio(vs_noop),
                            vs_noop >= 0.8 ? "yes" : "**no**");
      absl::StrAppendFormat(
          &md, "| %s p99 latency ÷ no-op RPC's p99 | %s | ≤ 2.00 | %s |\n",
          kSeriesName[series], Ratio(p99_vs_noop),
          p99_vs_noop > 0 && p99_vs_noop <= 2 ? "yes" : "**no**");
      absl::StrAppendFormat(&md, "| %s ÷ flush ceiling | %s | ≥ 3.00 | %s |\n",
                            kSeriesName[series], Ratio(vs_flush),
                            vs_flush >= 3 ? "yes" : "**no**");
      // From the CPU and calls summed over all runs, not the rounded table.
      const CpuUse& use = cpu[series][level];
      const double server_us =
          1e6 * use.server / std::max<int64_t>(use.calls, 1);
      const double cpu_vs_noop =
          noop_server_us > 0 ? server_us / noop_server_us : 0;
      absl::StrAppendFormat(
          &md,
          "| %s server CPU per request ÷ no-op RPC's | %s | ≤ 1.50 | %s |\n",
          kSeriesName[series], Ratio(cpu_vs_noop),
          cpu_vs_noop > 0 && cpu_vs_noop <= 1.5 ? "yes" : "**no**");
    }
  }

  // Tab-separated; the first line names the columns.
  data = "requests in flight";
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&data, "\t", kSeriesName[series]);
  }
  data += "\tflush ceiling (1 SQLite commit at a time)\n";
  for (size_t level = 0; level < o.in_flight.size(); ++level) {
    absl::StrAppend(&data, o.in_flight[level]);
    for (int series = 0; series < kSeriesCount; ++series) {
      absl::StrAppendFormat(&data, "\t%.0f", Median(rates[series][level]));
    }
    absl::StrAppendFormat(&data, "\t%.0f\n", Median(flush_rates));
  }

  if (absl::Status s = StopServer(**server); !s.ok()) return s;
  return StopServer(**unbatched);
}

}  // namespace hilo::bench
