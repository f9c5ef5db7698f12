#include <malloc.h>
#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/closed_loop.h"
#include "bench/proc_stats.h"
#include "bench/report_format.h"
#include "bench/rpc_calls.h"
#include "bench/sections.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"

namespace hilo::bench {
namespace {

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

int64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

}  // namespace

absl::Status RunMemory(BenchRun& run) {
  const BenchOptions& o = run.options();
  std::string& md = run.markdown();
  // Room for every collection this section makes, above the server's
  // default --max_collections if need be, and as fast as it makes them.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = run.StartServer(
      "memory",
      {absl::StrCat("--max_collections=",
                    o.memory_collections + o.client_memory_collections + 1000),
       "--max_collection_creations_per_minute=0"});
  if (!server.ok()) return server.status();
  const auto channels = MakeChannels((*server)->port(), o.channels);

  // Server: first the same load (256 in flight) on one collection, so the
  // baseline already holds what serving it costs whatever the collections
  // (threads, their stacks and malloc arenas, connection buffers).
  constexpr int kMemoryInFlight = 256;
  {
    NextRangeCalls calls(channels, kMemoryInFlight,
                         [](int64_t) { return std::string("warm"); });
    LoadResult warm = ClosedLoop(kMemoryInFlight, calls.Issuer())
                          .RunCount(o.smoke ? 1000 : 20000);
    run.Check("memory warm-up", warm.errors, warm.first_error);
  }
  const int64_t rss_start = RssBytes((*server)->pid());
  const int64_t threads_after_load = ThreadCount((*server)->pid());
  const int n = o.memory_collections;
  LoadResult created;
  {
    NextRangeCalls calls(channels, kMemoryInFlight, [](int64_t seq) {
      return absl::StrFormat("mem-%06d", seq);
    });
    created = ClosedLoop(kMemoryInFlight, calls.Issuer()).RunCount(n);
  }
  run.Check("memory: creating collections", created.errors,
            created.first_error);
  const int64_t rss_after = RssBytes((*server)->pid());
  const int64_t rss_peak = PeakRssBytes((*server)->pid());
  const std::string db = absl::StrCat(run.dir(), "/memory/hilo.db");
  const int64_t db_bytes = FileSize(db) + FileSize(db + "-wal");
  absl::FPrintF(stderr,
                "hilo_bench: server memory: %d collections in %.1f s; RSS %s "
                "-> %s (peak %s)\n",
                n, created.seconds, Bytes(rss_start), Bytes(rss_after),
                Bytes(rss_peak));

  // Client: one NextId on each of m new collections, from 16 threads.
  const int m = o.client_memory_collections;
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
  run.Check("memory: client collections", client_errors.load(), client_error);
  absl::FPrintF(stderr,
                "hilo_bench: client memory: %d collections; heap %s -> %s; "
                "destructor %s\n",
                m, Bytes(heap_before), Bytes(heap_after),
                Duration(destroy_nanos));

  absl::StrAppendFormat(
      &md,
      "\n### Memory\n\n"
      "| what | collections | before | after | per collection |\n"
      "|---|---:|---:|---:|---:|\n"
      "| server resident set (`VmRSS`; peak `VmHWM` %s) | %s | %s | %s | "
      "%.0f B |\n"
      "| server threads (`Threads`) after 256 in flight | | | %d | |\n"
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
      "destroying that client then took %s (it hands back every unused "
      "tail, in ReturnRanges batches of up to 1000).\n",
      Bytes(rss_peak), Thousands(n), Bytes(rss_start), Bytes(rss_after),
      n > 0 ? static_cast<double>(rss_after - rss_start) / n : 0.0,
      threads_after_load, Thousands(n), Bytes(db_bytes),
      n > 0 ? static_cast<double>(db_bytes) / n : 0.0, Thousands(m),
      Bytes(heap_before), Bytes(heap_after),
      m > 0 ? static_cast<double>(heap_after - heap_before) / m : 0.0, 100,
      Thousands(n), created.seconds,
      Thousands(static_cast<int64_t>(created.rate())), Thousands(m), kThreads,
      options.prefetch_at, Duration(destroy_nanos));
  return StopServer(**server);
}

}  // namespace hilo::bench
