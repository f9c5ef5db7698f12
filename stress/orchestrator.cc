#include "stress/orchestrator.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "stress/checks.h"
#include "stress/code_counts.h"
#include "stress/id_ledger.h"
#include "stress/stored_max.h"
#include "stress/worker_files.h"
#include "testing/server_process.h"

namespace hilo::stress {

using ::hilo::testing_util::ServerProcess;

Orchestrator::Orchestrator(StressOptions options)
    : options_(std::move(options)) {}

absl::Status Orchestrator::Setup() {
  work_dir_ = options_.work_dir;
  if (work_dir_.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/hilo-stress-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", pattern, ": ", strerror(errno)));
    }
    work_dir_ = pattern;
    remove_work_dir_ = !options_.keep_work_dir;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(work_dir_, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", work_dir_, ": ", ec.message()));
    }
  }
  db_dir_ = options_.db_dir;
  if (db_dir_.empty()) db_dir_ = work_dir_ + "/db";
  if (options_.server.empty()) targets_ = options_.targets;
  if (options_.fill) {
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
  faults_ = std::make_unique<FaultInjector>(
      options_, db_dir_, &report_, [this] { return UsedRangesByWorker(); });
  return absl::OkStatus();
}

absl::Status Orchestrator::StartNodes() {
  if (options_.server.empty()) return absl::OkStatus();
  for (int i = 0; i < options_.nodes; ++i) {
    Node node;
    node.tag = std::string(1, static_cast<char>('A' + i));
    node.db_path = absl::StrCat(db_dir_, "/node-", node.tag, "/hilo.db");
    std::vector<std::string> flags = {options_.shared_store()
                                          ? "--store=" + options_.store
                                          : "--db=" + node.db_path,
                                      "--node_tag=" + node.tag};
    // Only this first start may make the database; every restart after a
    // kill -9 (ServerProcess::Restart drops the flag) must reopen it.
    if (!options_.shared_store()) flags.push_back("--create_db");
    if (options_.server_max_range_size > 0) {
      flags.push_back(
          absl::StrCat("--max_range_size=", options_.server_max_range_size));
    }
    // New collections are part of the load here, made far faster than a
    // node's default creation rate allows; --server_args may set it again.
    if (options_.new_collection_every > 0) {
      flags.push_back("--max_collection_creations_per_minute=0");
    }
    for (const std::string& a : options_.server_args) flags.push_back(a);
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(options_.server, flags);
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
  for (int i = 0; i < options_.processes; ++i) {
    std::vector<std::string> args = {
        self,
        absl::StrCat("--worker=", i),
        absl::StrCat("--work_dir=", work_dir_),
        absl::StrCat("--targets=", absl::StrJoin(targets_, ",")),
        absl::StrCat("--threads=", options_.threads),
        absl::StrCat("--collections=", options_.collections),
        absl::StrCat("--ids_per_thread=", options_.ids_per_thread),
        absl::StrCat("--rpc_deadline=",
                     absl::FormatDuration(options_.rpc_deadline)),
        absl::StrCat("--return_every=", options_.return_every),
        absl::StrCat("--new_collection_every=", options_.new_collection_every),
        // Workers count with tags ignored when the servers share a store.
        absl::StrCat("--store=", options_.store),
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
          report_.Problem(absl::StrFormat(
              "worker pid %d died early (status %d)", pid, status));
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
        ByCounter(UsedRanges(ReadWorkerLog(WorkerLogPath(work_dir_, i), &bad)),
                  options_.shared_store()));
    for (std::string& b : bad) report_.Problem(std::move(b));
  }
  return by_worker;
}

void Orchestrator::InjectFaults() {
  enum class Fault { kKill, kPause, kFill, kRestartStore };
  std::vector<Fault> faults;
  for (int i = 0; i < options_.kill9; ++i) faults.push_back(Fault::kKill);
  for (int i = 0; i < options_.pause; ++i) faults.push_back(Fault::kPause);
  if (options_.fill) faults.push_back(Fault::kFill);
  for (int i = 0; i < options_.store_restarts; ++i) {
    faults.push_back(Fault::kRestartStore);
  }
  int kill_turn = 0, pause_turn = 0;
  for (size_t i = 0; i < faults.size(); ++i) {
    WaitUntil(start_ + options_.duration * (0.15 + 0.6 * i / faults.size()));
    switch (faults[i]) {
      case Fault::kKill:
        faults_->Kill(nodes_[kill_turn++ % nodes_.size()]);
        break;
      case Fault::kPause:
        faults_->Pause(nodes_[pause_turn++ % nodes_.size()]);
        break;
      case Fault::kFill:
        faults_->Fill(nodes_[0]);
        break;
      case Fault::kRestartStore:
        faults_->RestartStore();
        break;
    }
    last_fault_end_ = absl::Now();
  }
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
          report_.Problem(absl::StrFormat("worker pid %d ended with status %d",
                                          pid, status));
        }
        break;
      }
      if (absl::Now() > give_up) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        report_.Problem(
            absl::StrFormat("worker pid %d did not stop in 120 s", pid));
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    pid = -pid;
  }
}

void Orchestrator::CheckEverything() {
  const IdTotals ids = CheckIds();
  CheckTokens();
  const RangeTotals ranges = CheckRanges();
  StopNodes();

  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  absl::PrintF(
      "hilo_stress: %s ids=%d duplicates=%d outside_ranges=%d "
      "overlapping_ranges=%d ranges=%d errors=%s rpc_codes=%s "
      "return_codes=%s return_failures=%d ids_by_tag={%s} kills=%d "
      "pauses=%d fills=%d store_restarts=%d stored_max_checks=%d "
      "kills_checked=%d processes=%d "
      "threads=%d "
      "collections=%d nodes=%d seconds=%.1f problems=%d\n",
      report_.problems().empty() ? "PASS" : "FAIL", ids.ids, ids.duplicates,
      ids.outside, ranges.overlaps, ranges.used, FormatCodes(ids.errors),
      FormatCodes(ids.rpc_next), FormatCodes(ids.rpc_return),
      ids.return_failures,
      absl::StrJoin(ids.ids_by_tag, ",", absl::PairFormatter(":")),
      faults_->kills(), faults_->pauses(), faults_->fills(),
      faults_->store_restarts(), ranges.stored_max_checks,
      faults_->kills_checked(), options_.processes, options_.threads,
      options_.collections,
      nodes_.empty() ? static_cast<int>(targets_.size())
                     : static_cast<int>(nodes_.size()),
      seconds, report_.problems().size());
}

Orchestrator::IdTotals Orchestrator::CheckIds() {
  // Within workers (ledger) and across them (overlapping runs).
  IdTotals t;
  std::vector<std::vector<IdLedger::Run>> runs_by_worker;
  for (size_t i = 0; i < workers_.size(); ++i) {
    absl::StatusOr<WorkerResult> r =
        ReadWorkerResult(WorkerResultPath(work_dir_, i));
    if (!r.ok()) {
      report_.Problem(r.status().ToString());
      continue;
    }
    t.ids += r->ids;
    t.duplicates += r->duplicates;
    if (r->duplicates > 0) {
      report_.Problem(absl::StrFormat("worker %d was handed %d number(s) twice",
                                      i, r->duplicates));
    }
    t.outside += r->outside;
    for (const std::string& e : r->examples) {
      report_.Problem(absl::StrFormat("worker %d: %s", i, e));
    }
    t.return_failures += r->return_failures;
    for (const auto& [code, n] : r->errors) t.errors[code] += n;
    for (const auto& [code, n] : r->rpc_next) t.rpc_next[code] += n;
    for (const auto& [code, n] : r->rpc_return) t.rpc_return[code] += n;
    for (const IdLedger::Run& run : r->runs) {
      t.ids_by_tag[run.node_tag] += run.count;
    }
    runs_by_worker.push_back(std::move(r->runs));
    if (last_fault_end_ != absl::InfinitePast() &&
        r->last_ok <= last_fault_end_) {
      report_.Problem(absl::StrFormat(
          "worker %d took no ID after the last fault ended (its last at %s; "
          "its last error at %s)",
          i, absl::FormatTime(r->last_ok), r->last_error));
    }
  }
  IdFindings twice = FindIdsHandedToTwoWorkers(runs_by_worker);
  t.duplicates += twice.numbers;
  for (std::string& p : twice.problems) report_.Problem(std::move(p));
  for (const auto& [code, n] : t.errors) {
    if (options_.allowed_errors.count(code) == 0) {
      report_.Problem(absl::StrFormat("NextId failed %d time(s) with %s", n,
                                      CodeName(code)));
    }
  }
  for (int code : options_.expected_rpc_codes) {
    if (t.rpc_next.count(code) == 0) {
      report_.Problem(absl::StrFormat("no NextRange call ever ended with %s",
                                      CodeName(code)));
    }
  }
  if (t.ids == 0) report_.Problem("no ID was handed out at all");
  return t;
}

void Orchestrator::CheckTokens() {
  // Every range came with one, and every return carried its own.
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::vector<std::string> bad;
    const std::vector<std::string> token_problems =
        FindTokenProblems(ReadWorkerLog(WorkerLogPath(work_dir_, i), &bad));
    for (size_t k = 0; k < token_problems.size() && k < 5; ++k) {
      report_.Problem(absl::StrFormat("worker %d: %s", i, token_problems[k]));
    }
    if (token_problems.size() > 5) {
      report_.Problem(absl::StrFormat("worker %d: %d more such token problems",
                                      i, token_problems.size() - 5));
    }
  }
}

Orchestrator::RangeTotals Orchestrator::CheckRanges() {
  // Replies of one node never overlap; stored Max above them all.
  std::vector<UsedRange> used;
  for (const std::vector<UsedRange>& worker_used : UsedRangesByWorker()) {
    used.insert(used.end(), worker_used.begin(), worker_used.end());
  }
  const std::vector<std::string> overlaps = FindOverlaps(used);
  for (const std::string& o : overlaps) report_.Problem(o);
  const std::map<CollectionAndTag, int64_t> floors = Floors(used);
  std::map<CollectionAndTag, int64_t> maxes;
  int stored_max_checks = faults_->stored_max_checks();
  for (Node& node : nodes_) {
    absl::StatusOr<std::map<std::string, int64_t>> served = ListStoredMax(node);
    if (!served.ok()) {
      report_.Problem(absl::StrCat("at the end: ", served.status().message()));
      continue;
    }
    const std::string counter = CounterOf(node.tag, options_.shared_store());
    for (const auto& [name, max] : *served) maxes[{name, counter}] = max;
    StoredMaxFindings findings = CheckStoredMax(
        node.tag, counter, *served, floors, "at the end (ListCollections)");
    stored_max_checks += findings.checked;
    for (std::string& p : findings.problems) report_.Problem(std::move(p));
  }
  if (options_.check_no_gaps) {
    for (const std::string& g : FindGaps(used, maxes)) report_.Problem(g);
  }
  return RangeTotals{.used = used.size(),
                     .overlaps = overlaps.size(),
                     .stored_max_checks = stored_max_checks};
}

void Orchestrator::StopNodes() {
  // A clean stop: SIGTERM drains and exits 0.
  for (Node& node : nodes_) {
    // Our own idle connection would hold up the drain.
    node.hilo.reset();
    node.admin.reset();
    node.channel.reset();
    absl::StatusOr<int> code = node.process->Terminate();
    if (!code.ok() || *code != 0) {
      report_.Problem(absl::StrFormat(
          "node %s did not exit 0 on SIGTERM: %s", node.tag,
          code.ok() ? absl::StrCat("exit ", *code) : code.status().ToString()));
    }
  }
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
  report_.Note(absl::StrFormat(
      "%d process(es) x %d thread(s) x %d collection(s) against %s for %s",
      options_.processes, options_.threads, options_.collections,
      absl::StrJoin(targets_, ","), absl::FormatDuration(options_.duration)));
  start_ = absl::Now();
  if (absl::Status s = StartWorkers(); !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", s.message());
    return 2;
  }
  InjectFaults();
  WaitUntil(std::max(start_ + options_.duration,
                     last_fault_end_ == absl::InfinitePast()
                         ? start_
                         : last_fault_end_ + options_.recovery));
  StopWorkers();
  CheckEverything();
  if (remove_work_dir_ && report_.problems().empty()) {
    nodes_.clear();
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  } else if (!report_.problems().empty() || options_.keep_work_dir) {
    report_.Note(absl::StrCat("logs and databases kept in ", work_dir_));
  }
  return report_.problems().empty() ? 0 : 1;
}

}  // namespace hilo::stress
