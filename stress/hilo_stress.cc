// hilo_stress: load and faults against hilo servers, with every ID checked.
//
// P worker processes (--processes), each one hilo::Client shared by T
// threads (--threads) drawing IDs from C collections (--collections), run
// against servers given by --targets or started here (--server, --nodes).
// Each worker keeps every ID it was handed (IdLedger), and a global gRPC
// interceptor logs every range a server replied with and every return it
// sent (RangeRecorder). At the end the orchestrator checks:
//   - no (collection, number, node tag) was handed out twice, in one worker
//     or across workers;
//   - every ID lies in a range its own client was given (and below the
//     `last` of any return it sent for that range);
//   - every range came with a range_token, and every return carried the
//     token of the range it hands back;
//   - ranges one node replied with for one collection never overlap;
//   - each node's stored Max is at least every number it replied with and
//     still counts as handed out;
//   - NextId failed only with the codes of --allow_errors, and every worker
//     took IDs again after the last fault.
// With servers started here it can also inject faults while the load runs:
// --kill9 (kill -9 and restart on the same database and port; the stored
// Max is read from the file while the node is down, and again through the
// admin RPC after the restart), --pause (SIGSTOP for --pause_for, then
// SIGCONT) and --fill (fill the filesystem of --db_dir, probe the node
// while it is full, free the space, and check that allocation resumes with
// no number lost). With --store the started servers share one PostgreSQL
// database: then every node draws from the same counter, so the checks
// above hold across nodes with tags ignored, and --store_restarts runs
// --store_restart_command (say, an immediate stop and start of the
// database) during the load. It prints one summary line and exits 0 only if
// every check held:
//
//   hilo_stress: PASS ids=1234567 duplicates=0 outside_ranges=0 ...
//
// Short form (seconds):  hilo_stress --server=build/service/hilo_server
// Long form: see docs/reliability.md.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "hilo/client.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "stress/id_ledger.h"
#include "stress/range_log.h"
#include "stress/range_recorder.h"
#include "stress/raw_call.h"
#include "testing/server_process.h"

ABSL_FLAG(std::string, targets, "",
          "comma-separated addresses of running hilo servers; every worker's "
          "client gets all of them, in order (faults need --server instead)");
ABSL_FLAG(std::string, server, "",
          "path of hilo_server: start --nodes servers on 127.0.0.1:0 with "
          "their databases under --db_dir, and stop them at the end");
ABSL_FLAG(int, nodes, 1, "servers to start with --server (tags A, B, ...)");
ABSL_FLAG(int64_t, server_max_range_size, 4096,
          "--max_range_size of the started servers; small ranges make "
          "clients ask often (0: the server's default)");
ABSL_FLAG(std::string, server_args, "",
          "comma-separated extra flags for the started servers");
ABSL_FLAG(std::string, store, "",
          "a PostgreSQL URI the started servers share (--store of "
          "hilo_server) instead of a database file each; numbers are then "
          "checked per collection across nodes, tags ignored");
ABSL_FLAG(int, store_restarts, 0,
          "run --store_restart_command this many times during the load");
ABSL_FLAG(std::string, store_restart_command, "",
          "a shell command that stops and starts the shared database");
ABSL_FLAG(std::string, work_dir, "",
          "where workers write their logs and results; default a new "
          "directory under $TMPDIR, removed at the end");
ABSL_FLAG(std::string, db_dir, "",
          "where started servers keep their databases; default "
          "<work_dir>/db");
ABSL_FLAG(bool, keep_work_dir, false, "keep the work directory at the end");
ABSL_FLAG(int, processes, 2, "worker processes (one hilo::Client each)");
ABSL_FLAG(int, threads, 4, "threads per worker, sharing its client");
ABSL_FLAG(int, collections, 3, "collections each thread draws IDs from");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "how long the load runs (longer if faults need it)");
ABSL_FLAG(int64_t, ids_per_thread, 0,
          "stop a thread after this many IDs (0: run for --duration)");
ABSL_FLAG(absl::Duration, rpc_deadline, absl::Seconds(2),
          "the clients' deadline per RPC attempt");
ABSL_FLAG(int64_t, return_every, 0,
          "thread 0 of each worker hands unused ranges back after every this "
          "many of its IDs (0: only at the end)");
ABSL_FLAG(int64_t, new_collection_every, 0,
          "every this many draws of a thread go to a collection never used "
          "before, so the database keeps growing (0: never)");
ABSL_FLAG(int, kill9, 0,
          "kill -9 a started server this many times during the load and "
          "restart it on the same database and port");
ABSL_FLAG(int, pause, 0,
          "SIGSTOP a started server this many times during the load");
ABSL_FLAG(absl::Duration, pause_for, absl::Seconds(3),
          "how long each pause lasts; longer than --rpc_deadline makes "
          "clients hit their deadline");
ABSL_FLAG(bool, fill, false,
          "fill the filesystem of --db_dir during the load (it must be a "
          "small one, such as a tmpfs of a few MiB), then free it");
ABSL_FLAG(absl::Duration, fill_for, absl::Seconds(2),
          "how long the disk stays full after the node first refuses");
ABSL_FLAG(absl::Duration, recovery, absl::Seconds(2),
          "load that runs after the last fault; every worker must take IDs "
          "in it");
ABSL_FLAG(std::string, allow_errors, "",
          "comma-separated status codes NextId may return without failing "
          "the run, e.g. UNAVAILABLE,RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, expect_rpc_codes, "",
          "comma-separated status codes that NextRange calls must have met "
          "at least once, e.g. DEADLINE_EXCEEDED for a pause");
ABSL_FLAG(bool, check_no_gaps, false,
          "also require that the numbers below each stored Max were all "
          "given to some client (true with one node and no lost replies)");
ABSL_FLAG(int, worker, -1, "internal: run as worker N");

namespace hilo::stress {
namespace {

using ::hilo::testing_util::ServerProcess;

using CodeCounts = std::map<int, int64_t>;

constexpr absl::Duration kAdminDeadline = absl::Seconds(5);

std::string CodeName(int code) {
  if (code < 0) return "NONE";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

absl::StatusOr<int> CodeOf(absl::string_view name) {
  for (int code = 0; code <= 16; ++code) {
    if (CodeName(code) == name) return code;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is not a status code name"));
}

std::string FormatCodes(const CodeCounts& counts) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : counts) {
    parts.push_back(absl::StrCat(CodeName(code), ":", n));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::vector<std::string> SplitList(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipWhitespace());
}

std::string WorkerLog(const std::string& dir, int index) {
  return absl::StrCat(dir, "/worker-", index, ".log");
}
std::string WorkerResult(const std::string& dir, int index) {
  return absl::StrCat(dir, "/worker-", index, ".result");
}

// ----------------------------------------------------------------- worker

std::atomic<bool> stop_requested{false};

void OnStopSignal(int) { stop_requested.store(true); }

// The counter a node tag draws from: its own, or with a shared store (the
// servers' --store) the one every node shares.
std::string CounterOf(absl::string_view node_tag) {
  return absl::GetFlag(FLAGS_store).empty() ? std::string(node_tag) : "*";
}

// The used ranges of `events`, each under the counter it drew from.
std::vector<UsedRange> CountedRanges(const std::vector<RangeEvent>& events) {
  std::vector<UsedRange> used = UsedRanges(events);
  for (UsedRange& r : used) r.node_tag = CounterOf(r.node_tag);
  return used;
}

// Numbers of `runs` that no used range of the same (collection, tag)
// covers; appends up to a few descriptions to `examples`.
int64_t CountOutside(const std::vector<IdLedger::Run>& runs,
                     const std::vector<UsedRange>& used,
                     std::vector<std::string>* examples) {
  std::map<CollectionAndTag, std::vector<std::pair<int64_t, int64_t>>> given;
  for (const UsedRange& r : used) {
    if (r.used_high >= r.low) {
      given[{r.collection, r.node_tag}].emplace_back(r.low, r.used_high);
    }
  }
  for (auto& [key, intervals] : given)
    std::sort(intervals.begin(), intervals.end());
  int64_t outside = 0;
  for (const IdLedger::Run& run : runs) {
    const auto& intervals = given[{run.collection, run.node_tag}];
    // Walk the run through the sorted intervals, counting uncovered numbers.
    int64_t next = run.start;
    const int64_t end = run.start + run.count - 1;
    int64_t missing = 0;
    for (const auto& [low, high] : intervals) {
      if (high < next) continue;
      if (low > end) break;
      if (low > next) missing += low - next;
      next = std::max(next, high + 1);
      if (next > end) break;
    }
    if (next <= end) missing += end - next + 1;
    if (missing > 0 && examples->size() < 5) {
      examples->push_back(absl::StrFormat(
          "%s/%d..%d-%s: %d number(s) outside every range this client was "
          "given",
          run.collection, run.start, end, run.node_tag, missing));
    }
    outside += missing;
  }
  return outside;
}

int RunWorker(int index) {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  const std::string dir = absl::GetFlag(FLAGS_work_dir);
  RangeRecorder* recorder = RangeRecorder::Install();
  const int log_fd =
      open(WorkerLog(dir, index).c_str(),
           O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    absl::FPrintF(stderr, "hilo_stress worker %d: cannot write %s: %s\n", index,
                  WorkerLog(dir, index), strerror(errno));
    return 2;
  }
  recorder->SetLogFd(log_fd);

  std::atomic<int64_t> return_failures{0};
  ClientOptions options;
  options.targets = SplitList(absl::GetFlag(FLAGS_targets));
  options.rpc_deadline = absl::GetFlag(FLAGS_rpc_deadline);
  options.log = [&](absl::string_view) { ++return_failures; };
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) {
    absl::FPrintF(stderr, "hilo_stress worker %d: %s\n", index,
                  client.status().ToString());
    return 2;
  }

  const int threads = absl::GetFlag(FLAGS_threads);
  const int collections = absl::GetFlag(FLAGS_collections);
  const int64_t limit = absl::GetFlag(FLAGS_ids_per_thread);
  const int64_t return_every = absl::GetFlag(FLAGS_return_every);
  const int64_t new_every = absl::GetFlag(FLAGS_new_collection_every);
  IdLedger ledger;
  struct ThreadStats {
    int64_t ids = 0;
    int64_t duplicates = 0;
    CodeCounts errors;
    absl::Time last_ok = absl::InfinitePast();
    std::string last_error;  // the latest NextId error, with its time
  };
  std::vector<ThreadStats> stats(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ThreadStats& s = stats[t];
      int64_t draws = 0;
      int64_t next_return = return_every;
      std::vector<std::string> names;
      for (int c = 0; c < collections; ++c)
        names.push_back(absl::StrCat("c", c));
      while (!stop_requested.load(std::memory_order_relaxed) &&
             (limit == 0 || s.ids < limit)) {
        for (int i = 0; i < collections; ++i) {
          ++draws;
          std::string fresh;
          if (new_every > 0 && draws % new_every == 0) {
            fresh = absl::StrCat("n", index, "-", t, "-", draws);
          }
          const std::string& name =
              fresh.empty() ? names[(t + i) % collections] : fresh;
          absl::StatusOr<Id> id = (*client)->NextId(name);
          if (id.ok()) {
            if (!ledger.Add(name, CounterOf(id->node_tag.view()), id->number)) {
              ++s.duplicates;
            }
            ++s.ids;
            s.last_ok = absl::Now();
          } else {
            ++s.errors[static_cast<int>(id.status().code())];
            s.last_error =
                absl::StrCat(absl::FormatTime("%H:%M:%E3S", absl::Now(),
                                              absl::LocalTimeZone()),
                             " ", id.status().ToString());
            // Keep a failing server from turning the load into a spin.
            absl::SleepFor(absl::Milliseconds(5));
          }
        }
        if (t == 0 && return_every > 0 && s.ids >= next_return) {
          (*client)->ReturnUnusedRanges();
          next_return = s.ids + return_every;
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  client->reset();  // hands every unused tail back

  const std::vector<UsedRange> used = CountedRanges(recorder->Events());
  const std::vector<IdLedger::Run> runs = ledger.Runs();
  std::vector<std::string> examples;
  const int64_t outside = CountOutside(runs, used, &examples);

  ThreadStats total;
  for (const ThreadStats& s : stats) {
    total.ids += s.ids;
    total.duplicates += s.duplicates;
    for (const auto& [code, n] : s.errors) total.errors[code] += n;
    total.last_ok = std::max(total.last_ok, s.last_ok);
    if (!s.last_error.empty()) total.last_error = s.last_error;
  }
  const std::string path = WorkerResult(dir, index);
  std::ofstream out(path + ".tmp");
  out << "ids " << total.ids << "\n";
  out << "duplicates " << total.duplicates << "\n";
  out << "outside " << outside << "\n";
  for (const std::string& e : examples) out << "example " << e << "\n";
  for (const auto& [code, n] : total.errors) {
    out << "error " << code << " " << n << "\n";
  }
  if (!total.last_error.empty())
    out << "last_error " << total.last_error << "\n";
  for (const auto& [code, n] : recorder->NextRangeCodes()) {
    out << "rpc_next " << code << " " << n << "\n";
  }
  for (const auto& [code, n] : recorder->ReturnRangeCodes()) {
    out << "rpc_return " << code << " " << n << "\n";
  }
  out << "return_failures " << return_failures.load() << "\n";
  out << "last_ok_us "
      << (total.last_ok == absl::InfinitePast()
              ? 0
              : absl::ToUnixMicros(total.last_ok))
      << "\n";
  for (const IdLedger::Run& run : runs) {
    out << "run " << run.collection << " " << run.node_tag << " " << run.start
        << " " << run.count << "\n";
  }
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    absl::FPrintF(stderr, "hilo_stress worker %d: cannot write %s\n", index,
                  path);
    return 2;
  }
  close(log_fd);
  return 0;
}

// ----------------------------------------------------------- orchestrator

struct WorkerResultData {
  int64_t ids = 0;
  int64_t duplicates = 0;
  int64_t outside = 0;
  std::vector<std::string> examples;
  CodeCounts errors;
  CodeCounts rpc_next;
  CodeCounts rpc_return;
  int64_t return_failures = 0;
  absl::Time last_ok = absl::InfinitePast();
  std::string last_error;
  std::vector<IdLedger::Run> runs;
};

absl::StatusOr<WorkerResultData> ReadWorkerResult(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no result file ", path));
  WorkerResultData r;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    auto num = [&](size_t i) {
      int64_t v = 0;
      if (i < f.size()) (void)absl::SimpleAtoi(f[i], &v);
      return v;
    };
    if (f[0] == "ids")
      r.ids = num(1);
    else if (f[0] == "duplicates")
      r.duplicates = num(1);
    else if (f[0] == "outside")
      r.outside = num(1);
    else if (f[0] == "example")
      r.examples.push_back(line.substr(8));
    else if (f[0] == "error")
      r.errors[num(1)] += num(2);
    else if (f[0] == "rpc_next")
      r.rpc_next[num(1)] += num(2);
    else if (f[0] == "rpc_return")
      r.rpc_return[num(1)] += num(2);
    else if (f[0] == "return_failures")
      r.return_failures = num(1);
    else if (f[0] == "last_error")
      r.last_error = line.substr(11);
    else if (f[0] == "last_ok_us") {
      r.last_ok =
          num(1) == 0 ? absl::InfinitePast() : absl::FromUnixMicros(num(1));
    } else if (f[0] == "run" && f.size() == 5) {
      r.runs.push_back(IdLedger::Run{f[1], f[2], num(3), num(4)});
    }
  }
  return r;
}

// Every complete line of a worker log, parsed.
std::vector<RangeEvent> ReadWorkerLog(const std::string& path,
                                      std::vector<std::string>* problems) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  std::vector<RangeEvent> events;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a line still being written
    absl::StatusOr<RangeEvent> e =
        ParseEvent(absl::string_view(text).substr(start, end - start));
    if (e.ok()) {
      events.push_back(*std::move(e));
    } else {
      problems->push_back(e.status().ToString());
    }
    start = end + 1;
  }
  return events;
}

// Max per collection as stored in a database file. The server must not be
// running; the file is opened read-only and nothing is checkpointed.
absl::StatusOr<std::map<std::string, int64_t>> ReadStoredMax(
    const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::map<std::string, int64_t> maxes;
  sqlite3_stmt* stmt = nullptr;
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(db, "SELECT name, max FROM collections", -1, &stmt,
                            nullptr);
  }
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      maxes[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))] =
          sqlite3_column_int64(stmt, 1);
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  const std::string message = db != nullptr ? sqlite3_errmsg(db) : "";
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrFormat("reading %s: %s", path, message));
  }
  return maxes;
}

// One started server, its tag and database.
struct Node {
  std::string tag;
  std::string db_path;
  std::unique_ptr<ServerProcess> process;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hilo::v1::HiLo::Stub> hilo;
  std::unique_ptr<hilo::v1::HiLoAdmin::Stub> admin;

  void Connect() {
    channel = grpc::CreateChannel(process->address(),
                                  grpc::InsecureChannelCredentials());
    hilo = hilo::v1::HiLo::NewStub(channel);
    admin = hilo::v1::HiLoAdmin::NewStub(channel);
  }
};

template <typename Request, typename Response, typename Stub, typename Call>
grpc::Status CallWithDeadline(Stub* stub, Call call, const Request& request,
                              Response* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kAdminDeadline));
  return (stub->*call)(&context, request, response);
}

grpc::Status NextRange(Node& node, const std::string& collection,
                       hilo::v1::NextRangeResponse* response) {
  hilo::v1::NextRangeRequest request;
  request.set_collection(collection);
  return CallWithDeadline(node.hilo.get(), &hilo::v1::HiLo::Stub::NextRange,
                          request, response);
}

grpc::Status GetCollection(Node& node, const std::string& collection,
                           hilo::v1::GetCollectionResponse* response) {
  hilo::v1::GetCollectionRequest request;
  request.set_collection(collection);
  return CallWithDeadline(node.admin.get(),
                          &hilo::v1::HiLoAdmin::Stub::GetCollection, request,
                          response);
}

// Max of every collection stored on `node`, read through ListCollections a
// page at a time (thousands of collections take a few calls, not thousands).
absl::StatusOr<std::map<std::string, int64_t>> ListStoredMax(Node& node) {
  std::map<std::string, int64_t> maxes;
  hilo::v1::ListCollectionsRequest request;
  request.set_page_size(1000);
  while (true) {
    hilo::v1::ListCollectionsResponse response;
    grpc::Status s = CallWithDeadline(
        node.admin.get(), &hilo::v1::HiLoAdmin::Stub::ListCollections, request,
        &response);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrFormat("ListCollections on node %s: %s %s", node.tag,
                          CodeName(s.error_code()), s.error_message()));
    }
    for (const hilo::v1::Collection& c : response.collections()) {
      maxes[c.name()] = c.max();
    }
    if (response.next_page_token().empty()) return maxes;
    request.set_page_token(response.next_page_token());
  }
}

class Orchestrator {
 public:
  int Run();

 private:
  absl::Status Setup();
  absl::Status StartNodes();
  absl::Status StartWorkers();
  // Sleeps until `when`, failing if a worker dies meanwhile.
  void WaitUntil(absl::Time when);
  void Kill(Node& node);
  void Pause(Node& node);
  void Fill(Node& node);
  // Runs --store_restart_command.
  void RestartStore();
  void StopWorkers();
  void CheckEverything();
  void Problem(std::string text) {
    absl::FPrintF(stderr, "hilo_stress: PROBLEM: %s\n", text);
    problems_.push_back(std::move(text));
  }
  void Note(const std::string& text) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", text);
  }
  // Used ranges of every worker's log so far.
  std::vector<UsedRange> AllUsedRanges();
  // The same, one list per worker, each in the order of its log.
  std::vector<std::vector<UsedRange>> UsedRangesByWorker();
  // Checks `maxes` (stored Max by collection) of `node` against the floors
  // of every range logged so far; returns how many it checked.
  int CheckFloors(const Node& node, const std::map<std::string, int64_t>& maxes,
                  const std::map<CollectionAndTag, int64_t>& floors,
                  absl::string_view when);

  std::string work_dir_;
  bool remove_work_dir_ = false;
  std::string db_dir_;
  std::vector<std::string> targets_;
  std::vector<Node> nodes_;
  std::vector<pid_t> workers_;
  std::set<int> allowed_errors_;
  std::vector<int> expected_rpc_codes_;
  std::vector<std::string> problems_;
  absl::Time start_;
  absl::Time last_fault_end_ = absl::InfinitePast();
  int kills_ = 0;
  int pauses_ = 0;
  int fills_ = 0;
  int store_restarts_ = 0;
  int stored_max_checks_ = 0;
  // Kills after which stored Max was checked both in the file and through
  // the restarted node.
  int kills_checked_ = 0;
};

absl::Status Orchestrator::Setup() {
  work_dir_ = absl::GetFlag(FLAGS_work_dir);
  if (work_dir_.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/hilo-stress-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", pattern, ": ", strerror(errno)));
    }
    work_dir_ = pattern;
    remove_work_dir_ = !absl::GetFlag(FLAGS_keep_work_dir);
  } else {
    std::error_code ec;
    std::filesystem::create_directories(work_dir_, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", work_dir_, ": ", ec.message()));
    }
  }
  db_dir_ = absl::GetFlag(FLAGS_db_dir);
  if (db_dir_.empty()) db_dir_ = work_dir_ + "/db";
  for (const std::string& name : SplitList(absl::GetFlag(FLAGS_allow_errors))) {
    absl::StatusOr<int> code = CodeOf(name);
    if (!code.ok()) return code.status();
    allowed_errors_.insert(*code);
  }
  for (const std::string& name :
       SplitList(absl::GetFlag(FLAGS_expect_rpc_codes))) {
    absl::StatusOr<int> code = CodeOf(name);
    if (!code.ok()) return code.status();
    expected_rpc_codes_.push_back(*code);
  }
  const bool faults =
      absl::GetFlag(FLAGS_kill9) > 0 || absl::GetFlag(FLAGS_pause) > 0 ||
      absl::GetFlag(FLAGS_fill) || absl::GetFlag(FLAGS_store_restarts) > 0;
  if (absl::GetFlag(FLAGS_store_restarts) > 0 &&
      (absl::GetFlag(FLAGS_store).empty() ||
       absl::GetFlag(FLAGS_store_restart_command).empty())) {
    return absl::InvalidArgumentError(
        "--store_restarts needs --store and --store_restart_command");
  }
  if (!absl::GetFlag(FLAGS_store).empty() && absl::GetFlag(FLAGS_fill)) {
    return absl::InvalidArgumentError(
        "--fill fills the servers' own disk; with --store they have none");
  }
  if (absl::GetFlag(FLAGS_server).empty()) {
    targets_ = SplitList(absl::GetFlag(FLAGS_targets));
    if (targets_.empty()) {
      return absl::InvalidArgumentError(
          "give --server (start servers here) or --targets");
    }
    if (faults || absl::GetFlag(FLAGS_check_no_gaps)) {
      return absl::InvalidArgumentError(
          "--kill9, --pause, --fill and --check_no_gaps need servers "
          "started here (--server)");
    }
  } else if (!absl::GetFlag(FLAGS_targets).empty()) {
    return absl::InvalidArgumentError("give --server or --targets, not both");
  }
  if (absl::GetFlag(FLAGS_processes) < 1 || absl::GetFlag(FLAGS_threads) < 1 ||
      absl::GetFlag(FLAGS_collections) < 1 || absl::GetFlag(FLAGS_nodes) < 1 ||
      absl::GetFlag(FLAGS_nodes) > 26) {
    return absl::InvalidArgumentError(
        "--processes, --threads and --collections must be at least 1, "
        "--nodes 1 to 26");
  }
  if (absl::GetFlag(FLAGS_fill)) {
    struct stat db_stat = {}, work_stat = {};
    std::error_code ec;
    std::filesystem::create_directories(db_dir_, ec);
    if (stat(db_dir_.c_str(), &db_stat) != 0 ||
        stat(work_dir_.c_str(), &work_stat) != 0) {
      return absl::UnavailableError("cannot stat --db_dir or --work_dir");
    }
    if (db_stat.st_dev == work_stat.st_dev) {
      return absl::InvalidArgumentError(
          "--fill needs --db_dir on its own small filesystem, apart from "
          "--work_dir (the workers' logs must not fill up too)");
    }
  }
  return absl::OkStatus();
}

absl::Status Orchestrator::StartNodes() {
  const std::string binary = absl::GetFlag(FLAGS_server);
  if (binary.empty()) return absl::OkStatus();
  for (int i = 0; i < absl::GetFlag(FLAGS_nodes); ++i) {
    Node node;
    node.tag = std::string(1, static_cast<char>('A' + i));
    node.db_path = absl::StrCat(db_dir_, "/node-", node.tag, "/hilo.db");
    const std::string store = absl::GetFlag(FLAGS_store);
    std::vector<std::string> flags = {
        store.empty() ? "--db=" + node.db_path : "--store=" + store,
        "--node_tag=" + node.tag};
    if (const int64_t max = absl::GetFlag(FLAGS_server_max_range_size);
        max > 0) {
      flags.push_back(absl::StrCat("--max_range_size=", max));
    }
    // New collections are part of the load here, made far faster than a
    // node's default creation rate allows; --server_args may set it again.
    if (absl::GetFlag(FLAGS_new_collection_every) > 0) {
      flags.push_back("--max_collection_creations_per_minute=0");
    }
    for (const std::string& a : SplitList(absl::GetFlag(FLAGS_server_args))) {
      flags.push_back(a);
    }
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(binary, flags);
    if (!process.ok()) return process.status();
    node.process = *std::move(process);
    node.Connect();
    targets_.push_back(node.process->address());
    nodes_.push_back(std::move(node));
  }
  return absl::OkStatus();
}

absl::Status Orchestrator::StartWorkers() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe");
  self[n] = '\0';
  for (int i = 0; i < absl::GetFlag(FLAGS_processes); ++i) {
    std::vector<std::string> args = {
        self,
        absl::StrCat("--worker=", i),
        absl::StrCat("--work_dir=", work_dir_),
        absl::StrCat("--targets=", absl::StrJoin(targets_, ",")),
        absl::StrCat("--threads=", absl::GetFlag(FLAGS_threads)),
        absl::StrCat("--collections=", absl::GetFlag(FLAGS_collections)),
        absl::StrCat("--ids_per_thread=", absl::GetFlag(FLAGS_ids_per_thread)),
        absl::StrCat("--rpc_deadline=",
                     absl::FormatDuration(absl::GetFlag(FLAGS_rpc_deadline))),
        absl::StrCat("--return_every=", absl::GetFlag(FLAGS_return_every)),
        absl::StrCat("--new_collection_every=",
                     absl::GetFlag(FLAGS_new_collection_every)),
        // Workers count with tags ignored when the servers share a store.
        absl::StrCat("--store=", absl::GetFlag(FLAGS_store)),
    };
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      execv(argv[0], argv.data());
      _exit(127);
    }
    workers_.push_back(pid);
  }
  return absl::OkStatus();
}

void Orchestrator::WaitUntil(absl::Time when) {
  while (absl::Now() < when) {
    for (pid_t& pid : workers_) {
      int status = 0;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        // Workers with --ids_per_thread may finish early; others must not.
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          Problem(absl::StrFormat("worker pid %d died early (status %d)", pid,
                                  status));
        }
        pid = -pid;
      }
    }
    absl::SleepFor(std::min(absl::Milliseconds(50), when - absl::Now()));
  }
}

std::vector<std::vector<UsedRange>> Orchestrator::UsedRangesByWorker() {
  std::vector<std::vector<UsedRange>> by_worker;
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::vector<std::string> bad;
    by_worker.push_back(
        CountedRanges(ReadWorkerLog(WorkerLog(work_dir_, i), &bad)));
    for (std::string& b : bad) Problem(std::move(b));
  }
  return by_worker;
}

std::vector<UsedRange> Orchestrator::AllUsedRanges() {
  std::vector<UsedRange> all;
  for (const std::vector<UsedRange>& used : UsedRangesByWorker()) {
    all.insert(all.end(), used.begin(), used.end());
  }
  return all;
}

int Orchestrator::CheckFloors(const Node& node,
                              const std::map<std::string, int64_t>& maxes,
                              const std::map<CollectionAndTag, int64_t>& floors,
                              absl::string_view when) {
  int checked = 0;
  for (const auto& [key, floor] : floors) {
    if (key.second != CounterOf(node.tag)) continue;
    ++stored_max_checks_;
    ++checked;
    auto it = maxes.find(key.first);
    if (it == maxes.end()) {
      Problem(absl::StrFormat(
          "%s: node %s has no row for %s, though it replied with %d", when,
          node.tag, key.first, floor));
    } else if (it->second < floor) {
      Problem(absl::StrFormat(
          "%s: node %s stored Max of %s is %d, below %d, a number it "
          "replied with",
          when, node.tag, key.first, it->second, floor));
    }
  }
  return checked;
}

void Orchestrator::Kill(Node& node) {
  ++kills_;
  if (absl::Status s = node.process->Kill(); !s.ok()) {
    Problem(absl::StrCat("kill -9 node ", node.tag, ": ", s.ToString()));
    return;
  }
  const absl::Time killed = absl::Now();
  // The node is gone: every range it replied with that a worker logged so
  // far must be on disk.
  const std::vector<std::vector<UsedRange>> at_kill = UsedRangesByWorker();
  std::vector<UsedRange> all_at_kill;
  for (const std::vector<UsedRange>& used : at_kill) {
    all_at_kill.insert(all_at_kill.end(), used.begin(), used.end());
  }
  const std::map<CollectionAndTag, int64_t> floors = Floors(all_at_kill);
  const bool shared = !absl::GetFlag(FLAGS_store).empty();
  // A shared store outlives the node: it is read through the restarted
  // node (or any other) below.
  absl::StatusOr<std::map<std::string, int64_t>> stored =
      shared ? std::map<std::string, int64_t>() : ReadStoredMax(node.db_path);
  int checked_in_file = 0;
  if (shared) {
  } else if (!stored.ok()) {
    Problem(stored.status().ToString());
  } else {
    checked_in_file =
        CheckFloors(node, *stored, floors,
                    absl::StrCat("after kill -9 #", kills_, " (file)"));
  }
  if (absl::Status s = node.process->Restart(); !s.ok()) {
    Problem(absl::StrCat("restarting node ", node.tag, ": ", s.ToString()));
    return;
  }
  const absl::Duration down = absl::Now() - killed;
  // After the restart, through the node itself, on a new connection.
  node.Connect();
  absl::StatusOr<std::map<std::string, int64_t>> served = ListStoredMax(node);
  if (!served.ok()) {
    Problem(absl::StrCat("after restart #", kills_, ": ",
                         served.status().message()));
    return;
  }
  // The workers ran on meanwhile, and a return they sent to the restarted
  // node may have lowered Max below a range held at the kill, rightly. So
  // the floors here are those of the ranges replied before the kill (each
  // worker's log only grows: they are the first of its ranges now), with
  // every return logged by now; a return is logged before it is sent, so
  // none applied before the reads above is missed.
  const std::vector<std::vector<UsedRange>> now = UsedRangesByWorker();
  std::vector<UsedRange> held_since_kill;
  for (size_t i = 0; i < now.size() && i < at_kill.size(); ++i) {
    const size_t n = std::min(now[i].size(), at_kill[i].size());
    held_since_kill.insert(held_since_kill.end(), now[i].begin(),
                           now[i].begin() + n);
  }
  const int checked_served = CheckFloors(
      node, *served, Floors(held_since_kill),
      absl::StrCat("after restart #", kills_, " (ListCollections)"));
  if ((shared || checked_in_file > 0) && checked_served > 0) ++kills_checked_;
  Note(absl::StrFormat(
      "kill -9 #%d of node %s: back on port %d after %s; stored Max checked "
      "for %d collection(s)",
      kills_, node.tag, node.process->port(),
      absl::FormatDuration(absl::Trunc(down, absl::Milliseconds(1))),
      served->size()));
}

void Orchestrator::RestartStore() {
  ++store_restarts_;
  const absl::Time start = absl::Now();
  const std::string command = absl::GetFlag(FLAGS_store_restart_command);
  const int status = std::system(command.c_str());
  if (status != 0) {
    Problem(absl::StrFormat("store restart command \"%s\" failed (status %d)",
                            command, status));
    return;
  }
  Note(absl::StrFormat("store restart #%d: \"%s\" took %s", store_restarts_,
                       command,
                       absl::FormatDuration(absl::Trunc(
                           absl::Now() - start, absl::Milliseconds(1)))));
}

void Orchestrator::Pause(Node& node) {
  ++pauses_;
  if (absl::Status s = node.process->Pause(); !s.ok()) {
    Problem(s.ToString());
    return;
  }
  absl::SleepFor(absl::GetFlag(FLAGS_pause_for));
  if (absl::Status s = node.process->Resume(); !s.ok()) Problem(s.ToString());
  Note(absl::StrFormat("SIGSTOP #%d of node %s for %s, then SIGCONT", pauses_,
                       node.tag,
                       absl::FormatDuration(absl::GetFlag(FLAGS_pause_for))));
}

void Orchestrator::Fill(Node& node) {
  ++fills_;
  const std::string probe = "fill-probe";
  hilo::v1::NextRangeResponse range;
  grpc::Status s = NextRange(node, probe, &range);
  if (!s.ok()) {
    Problem(absl::StrCat("NextRange before the fill: ", s.error_message()));
    return;
  }
  int64_t known_max = range.high();

  // Fill the filesystem: big writes, then small ones, until ENOSPC.
  const std::string fill_path = db_dir_ + "/fill";
  const int fd =
      open(fill_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    Problem(absl::StrCat("cannot create ", fill_path, ": ", strerror(errno)));
    return;
  }
  int64_t written = 0;
  bool full = false;
  const std::string chunk(1 << 20, '\0');
  for (size_t size : {size_t{1} << 20, size_t{4096}, size_t{512}}) {
    while (written < (int64_t{4} << 30)) {
      const ssize_t n = write(fd, chunk.data(), size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == ENOSPC) {
        full = true;
        break;
      }
      if (n <= 0) break;
      written += n;
    }
  }
  close(fd);
  if (!full) {
    Problem(absl::StrFormat(
        "wrote %d bytes to %s without filling it; --fill needs a small "
        "filesystem",
        written, fill_path));
    unlink(fill_path.c_str());
    return;
  }
  Note(absl::StrFormat("filled %s with %d bytes", db_dir_, written));

  // While full: NextRange answers OK, RESOURCE_EXHAUSTED or UNAVAILABLE; a
  // refused one changes nothing; reads and health keep working.
  auto refused = [](const grpc::Status& st) {
    return st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
           st.error_code() == grpc::StatusCode::UNAVAILABLE;
  };
  CodeCounts seen;
  absl::Time first_refusal = absl::InfiniteFuture();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  int64_t fresh = 0;
  while (absl::Now() < give_up &&
         absl::Now() < first_refusal + absl::GetFlag(FLAGS_fill_for)) {
    // A new collection needs a new row, so the file must grow.
    const std::string name = absl::StrCat("fill-", fills_, "-", ++fresh);
    s = NextRange(node, name, &range);
    ++seen[s.error_code()];
    if (refused(s)) {
      first_refusal = std::min(first_refusal, absl::Now());
      // NOT_FOUND is the answer: the refused call created no row. OK means
      // it left one behind; any other code is a read that failed on a full
      // disk, a problem of its own.
      hilo::v1::GetCollectionResponse got;
      grpc::Status g = GetCollection(node, name, &got);
      if (g.ok()) {
        Problem(
            absl::StrFormat("refused NextRange(%s) left a row behind (max %d)",
                            name, got.collection().max()));
      } else if (g.error_code() != grpc::StatusCode::NOT_FOUND) {
        Problem(absl::StrFormat("GetCollection(%s) on a full disk: %s %s", name,
                                CodeName(g.error_code()), g.error_message()));
      }
    } else if (!s.ok()) {
      Problem(absl::StrFormat("NextRange on a full disk answered %s: %s",
                              CodeName(s.error_code()), s.error_message()));
    }
    s = NextRange(node, probe, &range);
    ++seen[s.error_code()];
    if (s.ok()) {
      if (range.low() != known_max + 1) {
        Problem(absl::StrFormat(
            "on a full disk NextRange(%s) gave %d-%d; expected it to start "
            "at %d",
            probe, range.low(), range.high(), known_max + 1));
      }
      known_max = range.high();
    } else if (refused(s)) {
      first_refusal = std::min(first_refusal, absl::Now());
      hilo::v1::GetCollectionResponse got;
      grpc::Status g = GetCollection(node, probe, &got);
      if (!g.ok()) {
        Problem(absl::StrFormat("GetCollection on a full disk: %s %s",
                                CodeName(g.error_code()), g.error_message()));
      } else if (got.collection().max() != known_max) {
        Problem(absl::StrFormat("refused NextRange(%s) moved Max from %d to %d",
                                probe, known_max, got.collection().max()));
        known_max = got.collection().max();
      }
    } else {
      Problem(absl::StrFormat("NextRange on a full disk answered %s: %s",
                              CodeName(s.error_code()), s.error_message()));
    }
    hilo::v1::ListCollectionsRequest list;
    list.set_page_size(10);
    hilo::v1::ListCollectionsResponse listed;
    grpc::Status l = CallWithDeadline(
        node.admin.get(), &hilo::v1::HiLoAdmin::Stub::ListCollections, list,
        &listed);
    bool serving = false;
    grpc::Status h = HealthCheck(node.channel, &serving, kAdminDeadline);
    if (!l.ok() || !h.ok() || !serving) {
      Problem(absl::StrFormat(
          "on a full disk ListCollections answered %s and health %s (%s)",
          CodeName(l.error_code()), CodeName(h.error_code()),
          serving ? "SERVING" : "not serving"));
    }
  }
  Note(absl::StrCat("while full, NextRange answered ", FormatCodes(seen)));
  if (first_refusal == absl::InfiniteFuture()) {
    Problem(
        "the disk was full for 30 s but NextRange never answered "
        "RESOURCE_EXHAUSTED or UNAVAILABLE");
  }

  // Space back: allocation resumes right above the last range replied.
  unlink(fill_path.c_str());
  const absl::Time freed = absl::Now();
  bool resumed = false;
  while (absl::Now() < freed + absl::Seconds(30)) {
    s = NextRange(node, probe, &range);
    if (s.ok()) {
      resumed = true;
      if (range.low() != known_max + 1) {
        Problem(absl::StrFormat(
            "after the disk was freed NextRange(%s) gave %d-%d; expected it "
            "to start at %d",
            probe, range.low(), range.high(), known_max + 1));
      }
      break;
    }
    if (!refused(s)) {
      Problem(absl::StrFormat("NextRange after freeing answered %s: %s",
                              CodeName(s.error_code()), s.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!resumed) Problem("allocation did not resume within 30 s of freeing");
  Note(absl::StrFormat("space freed; allocation resumed after %s",
                       absl::FormatDuration(absl::Trunc(
                           absl::Now() - freed, absl::Milliseconds(1)))));
}

void Orchestrator::StopWorkers() {
  for (pid_t pid : workers_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  // Each worker hands its ranges back and writes its result.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  for (pid_t& pid : workers_) {
    if (pid <= 0) continue;
    int status = 0;
    while (true) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          Problem(absl::StrFormat("worker pid %d ended with status %d", pid,
                                  status));
        }
        break;
      }
      if (absl::Now() > give_up) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        Problem(absl::StrFormat("worker pid %d did not stop in 120 s", pid));
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    pid = -pid;
  }
}

void Orchestrator::CheckEverything() {
  // IDs: within workers (ledger) and across them (overlapping runs).
  int64_t ids = 0, duplicates = 0, outside = 0, return_failures = 0;
  CodeCounts errors, rpc_next, rpc_return;
  std::map<std::string, int64_t> ids_by_tag;
  std::map<CollectionAndTag, std::vector<std::pair<int64_t, int64_t>>> runs;
  for (size_t i = 0; i < workers_.size(); ++i) {
    absl::StatusOr<WorkerResultData> r =
        ReadWorkerResult(WorkerResult(work_dir_, i));
    if (!r.ok()) {
      Problem(r.status().ToString());
      continue;
    }
    ids += r->ids;
    duplicates += r->duplicates;
    if (r->duplicates > 0) {
      Problem(absl::StrFormat("worker %d was handed %d number(s) twice", i,
                              r->duplicates));
    }
    outside += r->outside;
    for (const std::string& e : r->examples) {
      Problem(absl::StrFormat("worker %d: %s", i, e));
    }
    return_failures += r->return_failures;
    for (const auto& [code, n] : r->errors) errors[code] += n;
    for (const auto& [code, n] : r->rpc_next) rpc_next[code] += n;
    for (const auto& [code, n] : r->rpc_return) rpc_return[code] += n;
    for (const IdLedger::Run& run : r->runs) {
      runs[{run.collection, run.node_tag}].emplace_back(
          run.start, run.start + run.count - 1);
      ids_by_tag[run.node_tag] += run.count;
    }
    if (last_fault_end_ != absl::InfinitePast() &&
        r->last_ok <= last_fault_end_) {
      Problem(absl::StrFormat(
          "worker %d took no ID after the last fault ended (its last at %s; "
          "its last error at %s)",
          i, absl::FormatTime(r->last_ok), r->last_error));
    }
  }
  for (auto& [key, intervals] : runs) {
    std::sort(intervals.begin(), intervals.end());
    int64_t reach = 0;  // highest number covered so far
    for (const auto& [low, high] : intervals) {
      if (low <= reach) {
        const int64_t twice = std::min(reach, high) - low + 1;
        duplicates += twice;
        Problem(absl::StrFormat(
            "%d number(s) of %s node %s from %d were handed to two workers",
            twice, key.first, key.second, low));
      }
      reach = std::max(reach, high);
    }
  }
  for (const auto& [code, n] : errors) {
    if (allowed_errors_.count(code) == 0) {
      Problem(absl::StrFormat("NextId failed %d time(s) with %s", n,
                              CodeName(code)));
    }
  }
  for (int code : expected_rpc_codes_) {
    if (rpc_next.count(code) == 0) {
      Problem(absl::StrFormat("no NextRange call ever ended with %s",
                              CodeName(code)));
    }
  }
  if (ids == 0) Problem("no ID was handed out at all");

  // Tokens: every range came with one, and every return carried its own.
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::vector<std::string> bad;
    const std::vector<std::string> token_problems =
        FindTokenProblems(ReadWorkerLog(WorkerLog(work_dir_, i), &bad));
    for (size_t k = 0; k < token_problems.size() && k < 5; ++k) {
      Problem(absl::StrFormat("worker %d: %s", i, token_problems[k]));
    }
    if (token_problems.size() > 5) {
      Problem(absl::StrFormat("worker %d: %d more such token problems", i,
                              token_problems.size() - 5));
    }
  }

  // Ranges: replies of one node never overlap; stored Max above them all.
  const std::vector<UsedRange> used = AllUsedRanges();
  const std::vector<std::string> overlaps = FindOverlaps(used);
  for (const std::string& o : overlaps) Problem(o);
  const std::map<CollectionAndTag, int64_t> floors = Floors(used);
  std::map<CollectionAndTag, int64_t> maxes;
  for (Node& node : nodes_) {
    absl::StatusOr<std::map<std::string, int64_t>> served = ListStoredMax(node);
    if (!served.ok()) {
      Problem(absl::StrCat("at the end: ", served.status().message()));
      continue;
    }
    for (const auto& [name, max] : *served) {
      maxes[{name, CounterOf(node.tag)}] = max;
    }
    CheckFloors(node, *served, floors, "at the end (ListCollections)");
  }
  if (absl::GetFlag(FLAGS_check_no_gaps)) {
    for (const std::string& g : FindGaps(used, maxes)) Problem(g);
  }
  // A clean stop: SIGTERM drains and exits 0.
  for (Node& node : nodes_) {
    // Our own idle connection would hold up the drain.
    node.hilo.reset();
    node.admin.reset();
    node.channel.reset();
    absl::StatusOr<int> code = node.process->Terminate();
    if (!code.ok() || *code != 0) {
      Problem(absl::StrFormat(
          "node %s did not exit 0 on SIGTERM: %s", node.tag,
          code.ok() ? absl::StrCat("exit ", *code) : code.status().ToString()));
    }
  }

  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  absl::PrintF(
      "hilo_stress: %s ids=%d duplicates=%d outside_ranges=%d "
      "overlapping_ranges=%d ranges=%d errors=%s rpc_codes=%s "
      "return_codes=%s return_failures=%d ids_by_tag={%s} kills=%d "
      "pauses=%d fills=%d store_restarts=%d stored_max_checks=%d "
      "kills_checked=%d processes=%d "
      "threads=%d "
      "collections=%d nodes=%d seconds=%.1f problems=%d\n",
      problems_.empty() ? "PASS" : "FAIL", ids, duplicates, outside,
      overlaps.size(), used.size(), FormatCodes(errors), FormatCodes(rpc_next),
      FormatCodes(rpc_return), return_failures,
      absl::StrJoin(ids_by_tag, ",", absl::PairFormatter(":")), kills_, pauses_,
      fills_, store_restarts_, stored_max_checks_, kills_checked_,
      absl::GetFlag(FLAGS_processes), absl::GetFlag(FLAGS_threads),
      absl::GetFlag(FLAGS_collections),
      nodes_.empty() ? static_cast<int>(targets_.size())
                     : static_cast<int>(nodes_.size()),
      seconds, problems_.size());
}

int Orchestrator::Run() {
  if (absl::Status s = Setup(); !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", s.message());
    return 2;
  }
  if (absl::Status s = StartNodes(); !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", s.message());
    return 2;
  }
  Note(absl::StrFormat(
      "%d process(es) x %d thread(s) x %d collection(s) against %s for %s",
      absl::GetFlag(FLAGS_processes), absl::GetFlag(FLAGS_threads),
      absl::GetFlag(FLAGS_collections), absl::StrJoin(targets_, ","),
      absl::FormatDuration(absl::GetFlag(FLAGS_duration))));
  start_ = absl::Now();
  if (absl::Status s = StartWorkers(); !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", s.message());
    return 2;
  }

  // The faults, spread over the middle of the run, nodes in turn.
  enum class Fault { kKill, kPause, kFill, kRestartStore };
  std::vector<Fault> faults;
  for (int i = 0; i < absl::GetFlag(FLAGS_kill9); ++i) {
    faults.push_back(Fault::kKill);
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_pause); ++i) {
    faults.push_back(Fault::kPause);
  }
  if (absl::GetFlag(FLAGS_fill)) faults.push_back(Fault::kFill);
  for (int i = 0; i < absl::GetFlag(FLAGS_store_restarts); ++i) {
    faults.push_back(Fault::kRestartStore);
  }
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  int kill_turn = 0, pause_turn = 0;
  for (size_t i = 0; i < faults.size(); ++i) {
    WaitUntil(start_ + duration * (0.15 + 0.6 * i / faults.size()));
    switch (faults[i]) {
      case Fault::kKill:
        Kill(nodes_[kill_turn++ % nodes_.size()]);
        break;
      case Fault::kPause:
        Pause(nodes_[pause_turn++ % nodes_.size()]);
        break;
      case Fault::kFill:
        Fill(nodes_[0]);
        break;
      case Fault::kRestartStore:
        RestartStore();
        break;
    }
    last_fault_end_ = absl::Now();
  }
  WaitUntil(std::max(start_ + duration,
                     faults.empty()
                         ? start_
                         : last_fault_end_ + absl::GetFlag(FLAGS_recovery)));
  StopWorkers();
  CheckEverything();
  if (remove_work_dir_ && problems_.empty()) {
    nodes_.clear();
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  } else if (!problems_.empty() || absl::GetFlag(FLAGS_keep_work_dir)) {
    Note(absl::StrCat("logs and databases kept in ", work_dir_));
  }
  return problems_.empty() ? 0 : 1;
}

}  // namespace
}  // namespace hilo::stress

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Load and faults against hilo servers, with every ID checked.\n"
      "Short form:  hilo_stress --server=PATH/hilo_server\n"
      "See docs/reliability.md for the long form and the fault flags.");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    absl::FPrintF(stderr, "hilo_stress: unexpected argument \"%s\"\n", rest[1]);
    return 2;
  }
  if (const int worker = absl::GetFlag(FLAGS_worker); worker >= 0) {
    return hilo::stress::RunWorker(worker);
  }
  signal(SIGPIPE, SIG_IGN);
  return hilo::stress::Orchestrator().Run();
}
