// hilo_bench: the load tool. Measures, in one run, on this machine:
//
//   1. Server throughput: NextRange at 1, 16, 64 and 256 requests in flight
//      over loopback (gRPC callback API, closed loops), on 1 and on 100
//      collections, against a hilo_server child process with its default
//      settings (sync=full, max_batch=256, metrics on). Beside it, with the
//      same load generator: a no-op RPC on the same server
//      (grpc.health.v1.Health/Check, the gRPC ceiling), NextRange on a server
//      started with --max_batch=1 (no group commit), and single-row durable
//      SQLite commits in the same directory as the server's database (WAL,
//      synchronous=FULL, one transaction per row: the flush ceiling).
//   2. Client latency: hilo::Client behind an in-process proxy that adds a
//      fixed delay (2 ms) to every HiLo RPC, IDs drawn flat out on 2 threads;
//      how many calls waited, and p50 / p99 / p99.9 call latency, with
//      prefetch off and on.
//   3. Memory: the server's resident set with 100,000 collections, and the
//      client's heap per cached collection.
//
// Prints Markdown tables (ready for BENCHMARKS.md) on stdout and progress on
// stderr; --out_md and --out_data also write the tables and the throughput
// series (for bench/plot_throughput.gp) to files. Every server binds
// 127.0.0.1:0; every phase is bounded in time or count. Exits non-zero if
// any RPC failed or a server misbehaved. --smoke shrinks everything to a few
// seconds for the test suite.
#include <malloc.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/latency_histogram.h"
#include "bench/proc_stats.h"
#include "grpc/support/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "testing/server_process.h"

#ifndef HILO_SERVER_PATH
#define HILO_SERVER_PATH "hilo_server"
#endif

ABSL_FLAG(std::string, server, HILO_SERVER_PATH, "the hilo_server binary");
ABSL_FLAG(std::string, data_dir, "",
          "parent of the scratch directory holding every database (servers' "
          "and the flush ceiling's); default $TMPDIR or /tmp. It decides "
          "which disk is measured");
ABSL_FLAG(bool, keep_data, false, "keep the scratch directory");
ABSL_FLAG(std::string, server_flags, "",
          "extra flags for every hilo_server started, space-separated (for "
          "experiments, e.g. \"--sync=normal\"; the published numbers use "
          "none)");
ABSL_FLAG(std::string, in_flight, "1,16,64,256",
          "requests in flight for the throughput runs");
ABSL_FLAG(int, many_collections, 100,
          "collections of the multi-collection NextRange series");
ABSL_FLAG(int, channels, 2,
          "gRPC channels (TCP connections) the load generator spreads its "
          "requests over");
ABSL_FLAG(absl::Duration, warmup, absl::Milliseconds(300),
          "unmeasured load before each throughput measurement");
ABSL_FLAG(absl::Duration, duration, absl::Milliseconds(1500),
          "measured time of each throughput point");
ABSL_FLAG(int, repetitions, 3,
          "runs of every throughput point (interleaved); tables show the "
          "median");
ABSL_FLAG(absl::Duration, added_latency, absl::Milliseconds(2),
          "delay the proxy adds to each HiLo RPC in the client latency runs");
ABSL_FLAG(absl::Duration, latency_duration, absl::Seconds(3),
          "length of each client latency run");
ABSL_FLAG(int, latency_threads, 2, "threads drawing IDs in the latency runs");
ABSL_FLAG(double, prefetch_at, 0.2,
          "ClientOptions::prefetch_at of the latency run with prefetch on");
ABSL_FLAG(int, memory_collections, 100000,
          "collections created on a fresh server for its memory figure");
ABSL_FLAG(int, client_memory_collections, 10000,
          "collections cached by one client for its memory figure");
ABSL_FLAG(std::string, sections, "throughput,latency,memory",
          "which parts to run");
ABSL_FLAG(std::string, out_md, "", "also write the Markdown tables here");
ABSL_FLAG(std::string, out_data, "",
          "write the throughput series here (TSV, for the plot)");
ABSL_FLAG(bool, smoke, false,
          "a seconds-long run that only checks everything works; its numbers "
          "mean nothing");

namespace hilo::bench {
namespace {

using ::hilo::testing_util::ServerProcess;
using Clock = std::chrono::steady_clock;
using Done = std::function<void(grpc::Status)>;

constexpr absl::string_view kHealthCheckMethod = "/grpc.health.v1.Health/Check";
constexpr absl::Duration kRpcDeadline = absl::Seconds(30);

int64_t NanosSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start)
      .count();
}

// ---------------------------------------------------------------------------
// Formatting.

std::string Thousands(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

std::string Duration(int64_t nanos) {
  if (nanos < 1000) return absl::StrCat(nanos, " ns");
  if (nanos < 1000000) return absl::StrFormat("%.1f µs", nanos / 1e3);
  if (nanos < 1000000000) return absl::StrFormat("%.2f ms", nanos / 1e6);
  return absl::StrFormat("%.2f s", nanos / 1e9);
}

std::string Bytes(double bytes) {
  if (bytes < 1024) return absl::StrFormat("%.0f B", bytes);
  if (bytes < 1024 * 1024) return absl::StrFormat("%.1f KiB", bytes / 1024);
  return absl::StrFormat("%.1f MiB", bytes / (1024 * 1024));
}

std::string Ratio(double r) { return absl::StrFormat("%.2f", r); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "12,345 ±2%": the median, and half the spread of the runs around it.
std::string RateCell(const std::vector<double>& runs) {
  const double median = Median(runs);
  std::string cell = Thousands(static_cast<int64_t>(median + 0.5));
  if (runs.size() > 1 && median > 0) {
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
    cell += absl::StrFormat(" ±%.0f%%", 50.0 * (*hi - *lo) / median);
  }
  return cell;
}

// ---------------------------------------------------------------------------
// The closed-loop load generator.

struct LoadResult {
  int64_t calls = 0;   // completed in the measured window
  int64_t errors = 0;  // of those, failed
  std::string first_error;
  double seconds = 0;
  LatencyHistogram latency;
  // CPU time used during the window by the server process and by this
  // process (the load generator); 0 if not measured.
  double server_cpu = 0;
  double client_cpu = 0;

  double rate() const { return seconds > 0 ? calls / seconds : 0; }
};

// User + system CPU time of this process so far, in seconds.
double OwnCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// SIGTERM, then up to 20 s for a clean exit (SIGKILL after that).
// FAILED_PRECONDITION if the server did not exit 0.
absl::Status StopServer(ServerProcess& server) {
  const pid_t pid = server.pid();
  absl::StatusOr<int> code = server.Terminate(absl::Seconds(20));
  if (!code.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "hilo_server (pid %d): %s", pid, code.status().message()));
  }
  if (*code != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("hilo_server (pid %d) ended with exit %d", pid, *code));
  }
  return absl::OkStatus();
}

// Starts call number `seq` for `slot`; `done` runs exactly once, when it
// ends. A slot never has two calls at once.
using IssueFn = std::function<void(int slot, int64_t seq, Done done)>;

// Keeps `in_flight` calls running: each slot starts its next call from the
// completion of the previous one.
class ClosedLoop {
 public:
  ClosedLoop(int in_flight, IssueFn issue)
      : issue_(std::move(issue)), slots_(in_flight) {}

  // Runs for `warmup` unmeasured, then measures for `window`, including
  // the CPU time `server` and this process use meanwhile.
  LoadResult RunTimed(absl::Duration warmup, absl::Duration window,
                      const ServerProcess& server) {
    StartAll();
    absl::SleepFor(warmup);
    const double server_cpu = CpuSeconds(server.pid());
    const double client_cpu = OwnCpuSeconds();
    const Clock::time_point begin = Clock::now();
    phase_.store(kMeasuring);
    absl::SleepFor(window);
    phase_.store(kStopping);
    const Clock::time_point end = Clock::now();
    const double server_used = CpuSeconds(server.pid()) - server_cpu;
    const double client_used = OwnCpuSeconds() - client_cpu;
    WaitAll();
    LoadResult result = Collect(NanosSince(begin, end) / 1e9);
    result.server_cpu = server_used;
    result.client_cpu = client_used;
    return result;
  }

  // Runs calls 0 .. total-1, all measured.
  LoadResult RunCount(int64_t total) {
    limit_ = total;
    phase_.store(kMeasuring);
    const Clock::time_point begin = Clock::now();
    StartAll();
    WaitAll();
    return Collect(NanosSince(begin, Clock::now()) / 1e9);
  }

 private:
  enum Phase { kWarmup, kMeasuring, kStopping };
  struct Slot {
    Clock::time_point start;
    LatencyHistogram latency;
    int64_t calls = 0;
    int64_t errors = 0;
    std::string first_error;
  };

  void StartAll() {
    {
      base::MutexLock lock(&mu_);
      active_ = static_cast<int>(slots_.size());
    }
    for (size_t i = 0; i < slots_.size(); ++i) Next(static_cast<int>(i));
  }

  void WaitAll() {
    base::MutexLock lock(&mu_);
    mu_.Await([this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; });
  }

  void Next(int i) {
    const int64_t seq = seq_.fetch_add(1, std::memory_order_relaxed);
    if (phase_.load() == kStopping || (limit_ >= 0 && seq >= limit_)) {
      base::MutexLock lock(&mu_);
      --active_;
      return;
    }
    slots_[i].start = Clock::now();
    issue_(i, seq, [this, i](grpc::Status status) { OnDone(i, status); });
  }

  void OnDone(int i, const grpc::Status& status) {
    const Clock::time_point end = Clock::now();
    Slot& slot = slots_[i];
    if (phase_.load() == kMeasuring) {
      slot.latency.Record(NanosSince(slot.start, end));
      ++slot.calls;
      if (!status.ok()) {
        if (slot.errors++ == 0) {
          slot.first_error = absl::StrCat("code ", status.error_code(), ": ",
                                          status.error_message());
        }
      }
    }
    Next(i);
  }

  LoadResult Collect(double seconds) {
    LoadResult result;
    result.seconds = seconds;
    for (const Slot& slot : slots_) {
      result.calls += slot.calls;
      result.errors += slot.errors;
      if (result.first_error.empty()) result.first_error = slot.first_error;
      result.latency.Merge(slot.latency);
    }
    return result;
  }

  const IssueFn issue_;
  std::vector<Slot> slots_;
  std::atomic<int> phase_{kWarmup};
  std::atomic<int64_t> seq_{0};
  int64_t limit_ = -1;
  base::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
};

// Channels to one server, each its own TCP connection.
std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(int port, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("hilo_bench.channel", i);
    channels.push_back(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

std::unique_ptr<grpc::ClientContext> NewContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoSeconds(kRpcDeadline));
  return context;
}

// Issues NextRange(name(seq)) as a fresh client would (no previous range).
class NextRangeCalls {
 public:
  NextRangeCalls(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                 int in_flight, std::function<std::string(int64_t)> name)
      : name_(std::move(name)), calls_(in_flight) {
    for (const auto& channel : channels) {
      stubs_.push_back(hilo::v1::HiLo::NewStub(channel));
    }
  }

  IssueFn Issuer() {
    return [this](int slot, int64_t seq, Done done) {
      Call& call = calls_[slot];
      call.context = NewContext();
      call.request.set_collection(name_(seq));
      call.response.Clear();
      stubs_[slot % stubs_.size()]->async()->NextRange(
          call.context.get(), &call.request, &call.response,
          [&call, done = std::move(done)](grpc::Status status) {
            if (status.ok() && call.response.low() < 1) {
              status = grpc::Status(grpc::StatusCode::INTERNAL,
                                    "NextRange returned a range below 1");
            }
            done(std::move(status));
          });
    };
  }

 private:
  struct Call {
    std::unique_ptr<grpc::ClientContext> context;
    hilo::v1::NextRangeRequest request;
    hilo::v1::NextRangeResponse response;
  };
  const std::function<std::string(int64_t)> name_;
  std::vector<std::unique_ptr<hilo::v1::HiLo::Stub>> stubs_;
  std::vector<Call> calls_;
};

// Issues grpc.health.v1.Health/Check with hand-encoded bytes: an empty
// request; the reply must be 08 01 (status: SERVING).
class HealthCheckCalls {
 public:
  HealthCheckCalls(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                   int in_flight)
      : calls_(in_flight) {
    for (const auto& channel : channels) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    }
  }

  IssueFn Issuer() {
    return [this](int slot, int64_t seq, Done done) {
      Call& call = calls_[slot];
      call.context = NewContext();
      grpc::Slice empty("", 0);
      call.request = grpc::ByteBuffer(&empty, 1);
      call.response.Clear();
      stubs_[slot % stubs_.size()]->UnaryCall(
          call.context.get(), std::string(kHealthCheckMethod),
          grpc::StubOptions(), &call.request, &call.response,
          [&call, done = std::move(done)](grpc::Status status) {
            if (status.ok() && !call.checked) {
              call.checked = true;
              grpc::Slice reply;
              if (!call.response.DumpToSingleSlice(&reply).ok() ||
                  reply.size() != 2 || reply.begin()[0] != 0x08 ||
                  reply.begin()[1] != 0x01) {
                status = grpc::Status(grpc::StatusCode::INTERNAL,
                                      "Health/Check did not answer SERVING");
              }
            }
            done(std::move(status));
          });
    };
  }

 private:
  struct Call {
    std::unique_ptr<grpc::ClientContext> context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    bool checked = false;
  };
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::vector<Call> calls_;
};

// ---------------------------------------------------------------------------
// The flush ceiling.

absl::Status SqliteExec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("\"", sql, "\": ", error != nullptr ? error : "?"));
    sqlite3_free(error);
    return s;
  }
  return absl::OkStatus();
}

// Single-row durable commits, one transaction each (BEGIN IMMEDIATE; upsert
// of one row of 100; COMMIT), on one connection to a fresh database at
// `path` in WAL mode with synchronous=FULL: every COMMIT fsyncs the WAL, as
// the server's do. Nothing is batched, so this is what durable writes cost
// one at a time on this disk.
absl::StatusOr<LoadResult> FlushCeiling(const std::string& path,
                                        absl::Duration warmup,
                                        absl::Duration window) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("cannot open ", path, ": ", sqlite3_errmsg(db)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closer(db, sqlite3_close);
  std::string mode;
  sqlite3_exec(
      db, "PRAGMA journal_mode=WAL",
      +[](void* out, int, char** values, char**) {
        *static_cast<std::string*>(out) = values[0] != nullptr ? values[0] : "";
        return 0;
      },
      &mode, nullptr);
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("journal mode of ", path, " is \"", mode, "\", not wal"));
  }
  for (const char* sql :
       {"PRAGMA synchronous=FULL",
        "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v INTEGER)"}) {
    if (absl::Status s = SqliteExec(db, sql); !s.ok()) return s;
  }
  sqlite3_stmt* raw[3] = {};
  const char* sql[3] = {"BEGIN IMMEDIATE",
                        "INSERT INTO t (k, v) VALUES (?1, ?2) ON CONFLICT (k) "
                        "DO UPDATE SET v = excluded.v",
                        "COMMIT"};
  std::vector<std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>> stmts;
  for (int i = 0; i < 3; ++i) {
    if (sqlite3_prepare_v2(db, sql[i], -1, &raw[i], nullptr) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("prepare \"", sql[i], "\": ", sqlite3_errmsg(db)));
    }
    stmts.emplace_back(raw[i], sqlite3_finalize);
  }

  LoadResult result;
  const Clock::time_point begin =
      Clock::now() + absl::ToChronoNanoseconds(warmup);
  const Clock::time_point end = begin + absl::ToChronoNanoseconds(window);
  for (int64_t i = 0;; ++i) {
    const Clock::time_point start = Clock::now();
    if (start >= end) break;
    sqlite3_bind_int64(raw[1], 1, i % 100);
    sqlite3_bind_int64(raw[1], 2, i);
    for (sqlite3_stmt* stmt : raw) {
      if (sqlite3_step(stmt) != SQLITE_DONE) {
        return absl::InternalError(
            absl::StrCat("single-row commit: ", sqlite3_errmsg(db)));
      }
      sqlite3_reset(stmt);
    }
    const Clock::time_point stop = Clock::now();
    if (start >= begin) {
      ++result.calls;
      result.latency.Record(NanosSince(start, stop));
    }
  }
  result.seconds = NanosSince(begin, end) / 1e9;
  return result;
}

// ---------------------------------------------------------------------------
// The delaying proxy for the client latency runs.

// A HiLo service that sleeps `delay`, then forwards the call to a real
// server and returns its answer: the network of a client whose server is
// `delay` away. Counts the NextRange calls it forwarded.
class DelayingProxy final : public hilo::v1::HiLo::Service {
 public:
  DelayingProxy(std::shared_ptr<grpc::Channel> upstream, absl::Duration delay)
      : upstream_(hilo::v1::HiLo::NewStub(upstream)), delay_(delay) {}

  grpc::Status NextRange(grpc::ServerContext*,
                         const hilo::v1::NextRangeRequest* request,
                         hilo::v1::NextRangeResponse* response) override {
    next_range_calls_.fetch_add(1);
    absl::SleepFor(delay_);
    std::unique_ptr<grpc::ClientContext> context = NewContext();
    return upstream_->NextRange(context.get(), *request, response);
  }

  grpc::Status ReturnRange(grpc::ServerContext*,
                           const hilo::v1::ReturnRangeRequest* request,
                           hilo::v1::ReturnRangeResponse* response) override {
    absl::SleepFor(delay_);
    std::unique_ptr<grpc::ClientContext> context = NewContext();
    return upstream_->ReturnRange(context.get(), *request, response);
  }

  int64_t next_range_calls() const { return next_range_calls_.load(); }

 private:
  const std::unique_ptr<hilo::v1::HiLo::Stub> upstream_;
  const absl::Duration delay_;
  std::atomic<int64_t> next_range_calls_{0};
};

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

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

int64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// ---------------------------------------------------------------------------
// The run.

struct Settings {
  std::string server;
  std::vector<std::string> server_flags;
  std::vector<int> in_flight;
  int many_collections;
  int channels;
  absl::Duration warmup, duration;
  int repetitions;
  absl::Duration added_latency, latency_duration;
  int latency_threads;
  double prefetch_at;
  int memory_collections, client_memory_collections;
  bool smoke;
};

class Bench {
 public:
  Bench(Settings settings, std::string dir)
      : s_(std::move(settings)), dir_(std::move(dir)) {}

  // Each returns an error only for a failure that stops the whole run;
  // failed RPCs are counted in failures_.
  absl::Status Throughput();
  absl::Status Latency();
  absl::Status Memory();

  const std::string& markdown() const { return md_; }
  const std::string& data() const { return data_; }
  int64_t failures() const { return failures_; }

 private:
  absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer(
      const std::string& name, std::vector<std::string> extra_flags);
  // Notes failed calls of `what`; they fail the run.
  void Check(const std::string& what, int64_t errors,
             const std::string& first_error);

  const Settings s_;
  const std::string dir_;
  std::string md_;
  std::string data_;
  int64_t failures_ = 0;
};

absl::StatusOr<std::unique_ptr<ServerProcess>> Bench::StartServer(
    const std::string& name, std::vector<std::string> extra_flags) {
  std::vector<std::string> args = {
      "--listen=127.0.0.1:0",
      absl::StrCat("--db=", dir_, "/", name, "/hilo.db"),
      "--metrics_listen=127.0.0.1:0"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  args.insert(args.end(), s_.server_flags.begin(), s_.server_flags.end());
  absl::FPrintF(stderr, "hilo_bench: starting %s %s\n", s_.server,
                absl::StrJoin(args, " "));
  ServerProcess::Options options;
  options.echo_stderr = true;
  return ServerProcess::Start(s_.server, args, options);
}

void Bench::Check(const std::string& what, int64_t errors,
                  const std::string& first_error) {
  if (errors == 0) return;
  failures_ += errors;
  absl::FPrintF(stderr, "hilo_bench: %s: %d calls failed; first: %s\n", what,
                errors, first_error);
}

absl::Status Bench::Throughput() {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      StartServer("default", {});
  if (!server.ok()) return server.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> unbatched =
      StartServer("max_batch_1", {"--max_batch=1"});
  if (!unbatched.ok()) return unbatched.status();
  const auto channels = MakeChannels((*server)->port(), s_.channels);
  const auto unbatched_channels =
      MakeChannels((*unbatched)->port(), s_.channels);

  std::vector<std::string> many;
  for (int i = 0; i < s_.many_collections; ++i) {
    many.push_back(absl::StrFormat("bench-%03d", i));
  }
  auto one_name = [](int64_t) { return std::string("bench-one"); };
  auto many_name = [&many](int64_t seq) { return many[seq % many.size()]; };

  enum Series { kOne, kMany, kUnbatched, kNoop, kSeriesCount };
  const std::string kSeriesName[] = {
      "NextRange, 1 collection",
      absl::StrFormat("NextRange, %d collections", s_.many_collections),
      "NextRange, 1 collection, --max_batch=1", "no-op RPC (Health/Check)"};

  // rates[series][level] = one rate per repetition.
  std::vector<std::vector<std::vector<double>>> rates(
      kSeriesCount, std::vector<std::vector<double>>(s_.in_flight.size()));
  std::vector<std::vector<LatencyHistogram>> latency(
      kSeriesCount, std::vector<LatencyHistogram>(s_.in_flight.size()));
  struct CpuUse {
    int64_t calls = 0;
    double server = 0;  // seconds
    double client = 0;
  };
  std::vector<std::vector<CpuUse>> cpu(
      kSeriesCount, std::vector<CpuUse>(s_.in_flight.size()));
  std::vector<double> flush_rates;
  LatencyHistogram flush_latency;

  for (int rep = 0; rep < s_.repetitions; ++rep) {
    for (size_t level = 0; level < s_.in_flight.size(); ++level) {
      const int n = s_.in_flight[level];
      for (int series = 0; series < kSeriesCount; ++series) {
        LoadResult result;
        if (series == kNoop) {
          HealthCheckCalls calls(channels, n);
          result = ClosedLoop(n, calls.Issuer())
                       .RunTimed(s_.warmup, s_.duration, **server);
        } else {
          NextRangeCalls calls(
              series == kUnbatched ? unbatched_channels : channels, n,
              series == kMany ? std::function<std::string(int64_t)>(many_name)
                              : one_name);
          result = ClosedLoop(n, calls.Issuer())
                       .RunTimed(s_.warmup, s_.duration,
                                 series == kUnbatched ? **unbatched : **server);
        }
        Check(kSeriesName[series], result.errors, result.first_error);
        rates[series][level].push_back(result.rate());
        latency[series][level].Merge(result.latency);
        cpu[series][level].calls += result.calls;
        cpu[series][level].server += result.server_cpu;
        cpu[series][level].client += result.client_cpu;
        absl::FPrintF(stderr,
                      "hilo_bench: run %d/%d, %3d in flight, %-40s %9.0f/s "
                      "(p50 %s; CPU s: server %.2f, here %.2f)\n",
                      rep + 1, s_.repetitions, n, kSeriesName[series],
                      result.rate(), Duration(result.latency.Percentile(0.5)),
                      result.server_cpu, result.client_cpu);
      }
      // The disk's flush time drifts (a shared virtual disk can vary
      // tenfold within minutes), so the ceiling is sampled beside every
      // level and summarised as one median.
      absl::StatusOr<LoadResult> flush = FlushCeiling(
          absl::StrCat(dir_, "/flush_ceiling.db"), s_.warmup, s_.duration);
      if (!flush.ok()) return flush.status();
      flush_rates.push_back(flush->rate());
      flush_latency.Merge(flush->latency);
      absl::FPrintF(stderr, "hilo_bench: run %d/%d, %-56s %9.0f/s (p50 %s)\n",
                    rep + 1, s_.repetitions,
                    "flush ceiling (1 SQLite commit at a time)", flush->rate(),
                    Duration(flush->latency.Percentile(0.5)));
    }
  }

  // Tables.
  absl::StrAppendFormat(
      &md_,
      "### Server throughput (requests/s)\n\n"
      "Median of %d runs of %s each, the runs interleaved (± is half the "
      "spread of the runs). Server: `hilo_server` defaults (`--sync=full`, "
      "`--max_batch=256`, metrics on) in its own process; load over %d "
      "loopback connection%s with the gRPC callback API, each NextRange "
      "asking as a new client would (no previous range). Flush ceiling: "
      "one row upserted and committed per transaction, WAL, "
      "`synchronous=FULL`, in the servers' directory; one median of %d "
      "samples, one taken beside each row of each run.\n\n",
      s_.repetitions, absl::FormatDuration(s_.duration), s_.channels,
      s_.channels == 1 ? "" : "s", flush_rates.size());
  md_ += "| in flight |";
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md_, " ", kSeriesName[series], " |");
  }
  md_ += " flush ceiling (1 SQLite commit at a time) |\n|---:|";
  for (int series = 0; series <= kSeriesCount; ++series) md_ += "---:|";
  md_ += "\n";
  for (size_t level = 0; level < s_.in_flight.size(); ++level) {
    absl::StrAppend(&md_, "| ", s_.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      absl::StrAppend(&md_, " ", RateCell(rates[series][level]), " |");
    }
    absl::StrAppend(&md_, " ", RateCell(flush_rates), " |\n");
  }

  absl::StrAppend(&md_,
                  "\n### Server latency (p50 / p99 per request, all runs)\n\n"
                  "| in flight |");
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md_, " ", kSeriesName[series], " |");
  }
  md_ += " flush ceiling |\n|---:|";
  for (int series = 0; series <= kSeriesCount; ++series) md_ += "---:|";
  md_ += "\n";
  for (size_t level = 0; level < s_.in_flight.size(); ++level) {
    absl::StrAppend(&md_, "| ", s_.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      const LatencyHistogram& h = latency[series][level];
      absl::StrAppend(&md_, " ", Duration(h.Percentile(0.5)), " / ",
                      Duration(h.Percentile(0.99)), " |");
    }
    absl::StrAppend(&md_, " ", Duration(flush_latency.Percentile(0.5)), " / ",
                    Duration(flush_latency.Percentile(0.99)), " |\n");
  }

  absl::StrAppend(
      &md_,
      "\n### CPU per request (µs: server process / load generator, all "
      "runs)\n\n"
      "Both share the machine's cores; at a full machine, requests/s × "
      "(server + load generator) CPU per request ≈ cores × 10⁶.\n\n"
      "| in flight |");
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&md_, " ", kSeriesName[series], " |");
  }
  md_ += "\n|---:|";
  for (int series = 0; series < kSeriesCount; ++series) md_ += "---:|";
  md_ += "\n";
  for (size_t level = 0; level < s_.in_flight.size(); ++level) {
    absl::StrAppend(&md_, "| ", s_.in_flight[level], " |");
    for (int series = 0; series < kSeriesCount; ++series) {
      const CpuUse& use = cpu[series][level];
      const double calls = std::max<int64_t>(use.calls, 1);
      absl::StrAppendFormat(&md_, " %.0f / %.0f |", 1e6 * use.server / calls,
                            1e6 * use.client / calls);
    }
    md_ += "\n";
  }

  // Targets at 64 in flight.
  const auto at = std::find(s_.in_flight.begin(), s_.in_flight.end(), 64);
  if (at != s_.in_flight.end()) {
    const size_t level = at - s_.in_flight.begin();
    const double noop = Median(rates[kNoop][level]);
    const double flush = Median(flush_rates);
    absl::StrAppend(&md_,
                    "\n### Targets at 64 in flight\n\n"
                    "| ratio (medians) | measured | target | met |\n"
                    "|---|---:|---:|:---:|\n");
    for (int series : {kOne, kMany}) {
      const double nr = Median(rates[series][level]);
      const double vs_noop = noop > 0 ? nr / noop : 0;
      const double vs_flush = flush > 0 ? nr / flush : 0;
      absl::StrAppendFormat(&md_, "| %s ÷ no-op RPC | %s | ≥ 0.50 | %s |\n",
                            kSeriesName[series], Ratio(vs_noop),
                            vs_noop >= 0.5 ? "yes" : "**no**");
      absl::StrAppendFormat(&md_, "| %s ÷ flush ceiling | %s | ≥ 3.00 | %s |\n",
                            kSeriesName[series], Ratio(vs_flush),
                            vs_flush >= 3 ? "yes" : "**no**");
    }
  }

  // Tab-separated; the first line names the columns.
  data_ = "requests in flight";
  for (int series = 0; series < kSeriesCount; ++series) {
    absl::StrAppend(&data_, "\t", kSeriesName[series]);
  }
  data_ += "\tflush ceiling (1 SQLite commit at a time)\n";
  for (size_t level = 0; level < s_.in_flight.size(); ++level) {
    absl::StrAppend(&data_, s_.in_flight[level]);
    for (int series = 0; series < kSeriesCount; ++series) {
      absl::StrAppendFormat(&data_, "\t%.0f", Median(rates[series][level]));
    }
    absl::StrAppendFormat(&data_, "\t%.0f\n", Median(flush_rates));
  }

  if (absl::Status s = StopServer(**server); !s.ok()) return s;
  return StopServer(**unbatched);
}

absl::Status Bench::Latency() {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      StartServer("latency", {});
  if (!server.ok()) return server.status();
  DelayingProxy proxy(MakeChannels((*server)->port(), 1)[0], s_.added_latency);
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
  for (double prefetch : {0.0, s_.prefetch_at}) {
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
    LatencyRun run = DrawFlatOut(client->get(), "latency", s_.latency_threads,
                                 s_.latency_duration);
    run.fetches = proxy.next_range_calls() - fetches_before;
    run.waited = (*client)->stats().calls_waited;
    run.label = label;
    client->reset();  // returns the unused tail through the proxy
    Check(absl::StrCat("client latency, prefetch ", label), run.errors,
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
      &md_,
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
      absl::FormatDuration(s_.added_latency),
      absl::FormatDuration(s_.added_latency), s_.latency_threads,
      absl::FormatDuration(s_.latency_duration), timer,
      absl::FormatDuration(s_.added_latency));
  for (const LatencyRun& run : runs) {
    auto share = [&](int64_t n) {
      return absl::StrFormat("%s (%.4f%%)", Thousands(n),
                             run.calls > 0 ? 100.0 * n / run.calls : 0.0);
    };
    const bool met = run.calls > 0 && 100.0 * run.waited / run.calls < 0.1;
    absl::StrAppendFormat(
        &md_,
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

absl::Status Bench::Memory() {
  // Room for every collection this section makes, above the server's
  // default --max_collections if need be, and as fast as it makes them.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = StartServer(
      "memory", {absl::StrCat("--max_collections=",
                              s_.memory_collections +
                                  s_.client_memory_collections + 1000),
                 "--max_collection_creations_per_minute=0"});
  if (!server.ok()) return server.status();
  const auto channels = MakeChannels((*server)->port(), s_.channels);

  // Server: first the same load (256 in flight) on one collection, so the
  // baseline already holds what serving it costs whatever the collections
  // (threads, their stacks and malloc arenas, connection buffers).
  constexpr int kMemoryInFlight = 256;
  {
    NextRangeCalls calls(channels, kMemoryInFlight,
                         [](int64_t) { return std::string("warm"); });
    LoadResult warm = ClosedLoop(kMemoryInFlight, calls.Issuer())
                          .RunCount(s_.smoke ? 1000 : 20000);
    Check("memory warm-up", warm.errors, warm.first_error);
  }
  const int64_t rss_start = RssBytes((*server)->pid());
  const int n = s_.memory_collections;
  LoadResult created;
  {
    NextRangeCalls calls(channels, kMemoryInFlight, [](int64_t seq) {
      return absl::StrFormat("mem-%06d", seq);
    });
    created = ClosedLoop(kMemoryInFlight, calls.Issuer()).RunCount(n);
  }
  Check("memory: creating collections", created.errors, created.first_error);
  const int64_t rss_after = RssBytes((*server)->pid());
  const int64_t rss_peak = PeakRssBytes((*server)->pid());
  const std::string db = absl::StrCat(dir_, "/memory/hilo.db");
  const int64_t db_bytes = FileSize(db) + FileSize(db + "-wal");
  absl::FPrintF(stderr,
                "hilo_bench: server memory: %d collections in %.1f s; RSS %s "
                "-> %s (peak %s)\n",
                n, created.seconds, Bytes(rss_start), Bytes(rss_after),
                Bytes(rss_peak));

  // Client: one NextId on each of m new collections, from 16 threads.
  const int m = s_.client_memory_collections;
  constexpr int kThreads = 16;
  hilo::ClientOptions options;
  options.targets = {absl::StrCat("127.0.0.1:", (*server)->port())};
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) return client.status();
  if (absl::StatusOr<hilo::Id> id = (*client)->NextId("warm"); !id.ok()) {
    return id.status();
  }
  const int64_t heap_before = HeapInUse();
  std::atomic<int64_t> client_errors{0};
  std::string client_error;
  base::Mutex error_mu;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t; i < m; i += kThreads) {
          absl::StatusOr<hilo::Id> id =
              (*client)->NextId(absl::StrFormat("client-%06d", i));
          if (!id.ok() && client_errors.fetch_add(1) == 0) {
            base::MutexLock lock(&error_mu);
            client_error = id.status().ToString();
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  const int64_t heap_after = HeapInUse();
  const Clock::time_point destroy_start = Clock::now();
  client->reset();
  const int64_t destroy_nanos = NanosSince(destroy_start, Clock::now());
  Check("memory: client collections", client_errors.load(), client_error);
  absl::FPrintF(stderr,
                "hilo_bench: client memory: %d collections; heap %s -> %s; "
                "destructor %s\n",
                m, Bytes(heap_before), Bytes(heap_after),
                Duration(destroy_nanos));

  absl::StrAppendFormat(
      &md_,
      "\n### Memory\n\n"
      "| what | collections | before | after | per collection |\n"
      "|---|---:|---:|---:|---:|\n"
      "| server resident set (`VmRSS`; peak `VmHWM` %s) | %s | %s | %s | "
      "%.0f B |\n"
      "| server database file + WAL | %s | | %s | %.0f B |\n"
      "| client heap in use (`mallinfo2`), one `NextId` per collection | %s | "
      "%s | %s | %.0f B |\n\n"
      "Server: a fresh `hilo_server` (defaults but `--max_collections` "
      "raised to hold them, metrics on: the first %d "
      "collections get their own metrics label, the rest share one); "
      "*before* is after it served the same load (256 in flight) on one "
      "collection, so the difference is what the collections cost; they were "
      "then created by %s NextRange calls at 256 in flight in %.1f s "
      "(%s/s). Client: the heap of this process before and after one "
      "`NextId` on each of %s new collections from %d threads (client "
      "defaults, prefetch_at = %g); "
      "destroying that client then took %s (it hands back each collection's "
      "unused tail, up to 64 collections at once).\n",
      Bytes(rss_peak), Thousands(n), Bytes(rss_start), Bytes(rss_after),
      n > 0 ? static_cast<double>(rss_after - rss_start) / n : 0.0,
      Thousands(n), Bytes(db_bytes),
      n > 0 ? static_cast<double>(db_bytes) / n : 0.0, Thousands(m),
      Bytes(heap_before), Bytes(heap_after),
      m > 0 ? static_cast<double>(heap_after - heap_before) / m : 0.0, 100,
      Thousands(n), created.seconds,
      Thousands(static_cast<int64_t>(created.rate())), Thousands(m), kThreads,
      options.prefetch_at, Duration(destroy_nanos));
  return StopServer(**server);
}

absl::StatusOr<std::vector<int>> ParseInts(absl::string_view list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", part,
                       "\" in --in_flight is not a positive "
                       "number"));
    }
    out.push_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--in_flight is empty");
  return out;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    absl::FPrintF(stderr, "hilo_bench: cannot write %s\n", path);
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures hilo's server throughput against the gRPC and flush "
      "ceilings, client latency with added server latency, and memory.\n"
      "Usage: hilo_bench [--smoke] [--out_md=FILE] [--out_data=FILE] ...");
  absl::ParseCommandLine(argc, argv);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);

  Settings s;
  s.server = absl::GetFlag(FLAGS_server);
  s.server_flags =
      absl::StrSplit(absl::GetFlag(FLAGS_server_flags), ' ', absl::SkipEmpty());
  absl::StatusOr<std::vector<int>> in_flight =
      ParseInts(absl::GetFlag(FLAGS_in_flight));
  if (!in_flight.ok()) {
    absl::FPrintF(stderr, "hilo_bench: %s\n", in_flight.status().message());
    return 2;
  }
  s.in_flight = *in_flight;
  s.many_collections = std::max(1, absl::GetFlag(FLAGS_many_collections));
  s.channels = std::max(1, absl::GetFlag(FLAGS_channels));
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.duration = absl::GetFlag(FLAGS_duration);
  s.repetitions = std::max(1, absl::GetFlag(FLAGS_repetitions));
  s.added_latency = absl::GetFlag(FLAGS_added_latency);
  s.latency_duration = absl::GetFlag(FLAGS_latency_duration);
  s.latency_threads = std::max(1, absl::GetFlag(FLAGS_latency_threads));
  s.prefetch_at = absl::GetFlag(FLAGS_prefetch_at);
  s.memory_collections = std::max(0, absl::GetFlag(FLAGS_memory_collections));
  s.client_memory_collections =
      std::max(0, absl::GetFlag(FLAGS_client_memory_collections));
  s.smoke = absl::GetFlag(FLAGS_smoke);
  if (s.smoke) {
    s.warmup = absl::Milliseconds(30);
    s.duration = absl::Milliseconds(100);
    s.repetitions = 1;
    s.latency_duration = absl::Milliseconds(300);
    s.memory_collections = 2000;
    s.client_memory_collections = 200;
  }
  const std::string sections = absl::GetFlag(FLAGS_sections);
  auto wanted = [&](absl::string_view name) {
    for (absl::string_view part : absl::StrSplit(sections, ',')) {
      if (part == name) return true;
    }
    return false;
  };

  std::string parent = absl::GetFlag(FLAGS_data_dir);
  if (parent.empty()) {
    const char* tmp = getenv("TMPDIR");
    parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string dir_template = parent + "/hilo_bench.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    absl::FPrintF(stderr, "hilo_bench: cannot create a directory in %s\n",
                  parent);
    return 1;
  }
  const std::string dir = dir_template;

  Bench bench(s, dir);
  absl::Status status;
  if (status.ok() && wanted("throughput")) status = bench.Throughput();
  if (status.ok() && wanted("latency")) status = bench.Latency();
  if (status.ok() && wanted("memory")) status = bench.Memory();

  if (!absl::GetFlag(FLAGS_keep_data)) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string md = bench.markdown();
  if (s.smoke) {
    md = "_Smoke run: these numbers only show that the benchmark works._\n\n" +
         md;
  }
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  bool wrote = true;
  if (const std::string out = absl::GetFlag(FLAGS_out_md); !out.empty()) {
    wrote = WriteFile(out, md) && wrote;
  }
  if (const std::string out = absl::GetFlag(FLAGS_out_data); !out.empty()) {
    wrote = WriteFile(out, bench.data()) && wrote;
  }
  if (!status.ok()) {
    absl::FPrintF(stderr, "hilo_bench: %s\n", status.ToString());
    return 1;
  }
  if (bench.failures() > 0) {
    absl::FPrintF(stderr, "hilo_bench: %d calls failed\n", bench.failures());
    return 1;
  }
  return wrote ? 0 : 1;
}

}  // namespace
}  // namespace hilo::bench

int main(int argc, char** argv) { return hilo::bench::Main(argc, argv); }
