#include "stress/faults.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "stress/checks.h"
#include "stress/code_counts.h"
#include "stress/raw_call.h"
#include "stress/stored_max.h"

namespace hilo::stress {

FaultInjector::FaultInjector(const StressOptions& options, std::string db_dir,
                             Report* report,
                             UsedRangesByWorker used_ranges_by_worker)
    : options_(options),
      db_dir_(std::move(db_dir)),
      report_(report),
      used_ranges_by_worker_(std::move(used_ranges_by_worker)) {}

int FaultInjector::CheckStoredMaxOf(
    const Node& node, const std::map<std::string, int64_t>& stored_max,
    const std::map<CollectionAndTag, int64_t>& floors, absl::string_view when) {
  StoredMaxFindings findings =
      CheckStoredMax(node.tag, CounterOf(node.tag, options_.shared_store()),
                     stored_max, floors, when);
  for (std::string& p : findings.problems) report_->Problem(std::move(p));
  stored_max_checks_ += findings.checked;
  return findings.checked;
}

void FaultInjector::Kill(Node& node) {
  ++kills_;
  if (absl::Status s = node.process->Kill(); !s.ok()) {
    report_->Problem(
        absl::StrCat("kill -9 node ", node.tag, ": ", s.ToString()));
    return;
  }
  const absl::Time killed = absl::Now();
  // The node is gone: every range it replied with that a worker logged so
  // far must be on disk.
  const std::vector<std::vector<UsedRange>> at_kill = used_ranges_by_worker_();
  std::vector<UsedRange> all_at_kill;
  for (const std::vector<UsedRange>& used : at_kill) {
    all_at_kill.insert(all_at_kill.end(), used.begin(), used.end());
  }
  const std::map<CollectionAndTag, int64_t> floors = Floors(all_at_kill);
  const bool shared = options_.shared_store();
  // A shared store outlives the node: it is read through the restarted
  // node (or any other) below.
  int checked_in_file = 0;
  if (!shared) {
    absl::StatusOr<std::map<std::string, int64_t>> stored =
        ReadStoredMaxFromFile(node.db_path);
    if (!stored.ok()) {
      report_->Problem(stored.status().ToString());
    } else {
      checked_in_file =
          CheckStoredMaxOf(node, *stored, floors,
                           absl::StrCat("after kill -9 #", kills_, " (file)"));
    }
  }
  if (absl::Status s = node.process->Restart(); !s.ok()) {
    report_->Problem(
        absl::StrCat("restarting node ", node.tag, ": ", s.ToString()));
    return;
  }
  const absl::Duration down = absl::Now() - killed;
  // After the restart, through the node itself, on a new connection.
  node.Connect();
  absl::StatusOr<std::map<std::string, int64_t>> served = ListStoredMax(node);
  if (!served.ok()) {
    report_->Problem(absl::StrCat("after restart #", kills_, ": ",
                                  served.status().message()));
    return;
  }
  // The workers ran on meanwhile, and a return they sent to the restarted
  // node may have lowered Max below a range held at the kill, rightly. So
  // the floors here are those of the ranges replied before the kill (each
  // worker's log only grows: they are the first of its ranges now), with
  // every return logged by now; a return is logged before it is sent, so
  // none applied before the reads above is missed.
  const std::vector<std::vector<UsedRange>> now = used_ranges_by_worker_();
  std::vector<UsedRange> held_since_kill;
  for (size_t i = 0; i < now.size() && i < at_kill.size(); ++i) {
    const size_t n = std::min(now[i].size(), at_kill[i].size());
    held_since_kill.insert(held_since_kill.end(), now[i].begin(),
                           now[i].begin() + n);
  }
  const int checked_served = CheckStoredMaxOf(
      node, *served, Floors(held_since_kill),
      absl::StrCat("after restart #", kills_, " (ListCollections)"));
  if ((shared || checked_in_file > 0) && checked_served > 0) ++kills_checked_;
  report_->Note(absl::StrFormat(
      "kill -9 #%d of node %s: back on port %d after %s; stored Max checked "
      "for %d collection(s)",
      kills_, node.tag, node.process->port(),
      absl::FormatDuration(absl::Trunc(down, absl::Milliseconds(1))),
      served->size()));
}

void FaultInjector::RestartStore() {
  ++store_restarts_;
  const absl::Time start = absl::Now();
  const std::string command = options_.store_restart_command;
  const int status = std::system(command.c_str());
  if (status != 0) {
    report_->Problem(absl::StrFormat(
        "store restart command \"%s\" failed (status %d)", command, status));
    return;
  }
  report_->Note(absl::StrFormat(
      "store restart #%d: \"%s\" took %s", store_restarts_, command,
      absl::FormatDuration(
          absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))));
}

void FaultInjector::Pause(Node& node) {
  ++pauses_;
  if (absl::Status s = node.process->Pause(); !s.ok()) {
    report_->Problem(s.ToString());
    return;
  }
  absl::SleepFor(options_.pause_for);
  if (absl::Status s = node.process->Resume(); !s.ok())
    report_->Problem(s.ToString());
  report_->Note(absl::StrFormat("SIGSTOP #%d of node %s for %s, then SIGCONT",
                                pauses_, node.tag,
                                absl::FormatDuration(options_.pause_for)));
}

void FaultInjector::Fill(Node& node) {
  ++fills_;
  const std::string probe = "fill-probe";
  hilo::v1::NextRangeResponse range;
  grpc::Status s = NextRange(node, probe, &range);
  if (!s.ok()) {
    report_->Problem(
        absl::StrCat("NextRange before the fill: ", s.error_message()));
    return;
  }
  const std::string fill_path = db_dir_ + "/fill";
  if (!FillFilesystem(fill_path)) return;
  int64_t known_max = range.high();
  CheckWhileFull(node, probe, &known_max);
  unlink(fill_path.c_str());
  CheckAfterFreeing(node, probe, known_max);
}

bool FaultInjector::FillFilesystem(const std::string& fill_path) {
  // Big writes, then small ones, until ENOSPC.
  const int fd =
      open(fill_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    report_->Problem(
        absl::StrCat("cannot create ", fill_path, ": ", strerror(errno)));
    return false;
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
    report_->Problem(absl::StrFormat(
        "wrote %d bytes to %s without filling it; --fill needs a small "
        "filesystem",
        written, fill_path));
    unlink(fill_path.c_str());
    return false;
  }
  report_->Note(absl::StrFormat("filled %s with %d bytes", db_dir_, written));
  return true;
}

namespace {

// The answers a full disk may give a write.
bool RefusedForSpace(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

}  // namespace

void FaultInjector::CheckWhileFull(Node& node, const std::string& probe,
                                   int64_t* known_max) {
  // NextRange answers OK, RESOURCE_EXHAUSTED or UNAVAILABLE; a refused one
  // changes nothing; reads and health keep working, and health says
  // NOT_SERVING after a write failed for want of space (docs/server.md).
  // It says SERVING again after any commit succeeds, and on a full disk
  // some do (SQLite reuses its WAL's space after a checkpoint), this
  // process's other clients' among them: so a check that found it SERVING
  // after a refusal proves nothing, and one that never found it
  // NOT_SERVING once refusals began is the problem.
  CodeCounts seen;
  absl::Time first_refusal = absl::InfiniteFuture();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  int64_t fresh = 0;
  int checks_after_refusal = 0;
  int not_serving = 0;
  while (absl::Now() < give_up &&
         absl::Now() < first_refusal + options_.fill_for) {
    // A new collection needs a new row, so the file must grow.
    const std::string name = absl::StrCat("fill-", fills_, "-", ++fresh);
    grpc::Status s = CheckNewCollectionWhileFull(node, name);
    ++seen[s.error_code()];
    if (RefusedForSpace(s))
      first_refusal = std::min(first_refusal, absl::Now());
    s = CheckProbeWhileFull(node, probe, known_max);
    ++seen[s.error_code()];
    if (RefusedForSpace(s))
      first_refusal = std::min(first_refusal, absl::Now());
    const bool serving = CheckReadsWhileFull(node);
    if (first_refusal != absl::InfiniteFuture()) {
      ++checks_after_refusal;
      if (!serving) ++not_serving;
    }
  }
  report_->Note(absl::StrCat("while full, NextRange answered ",
                             FormatCodes(seen), "; health NOT_SERVING at ",
                             not_serving, " of ", checks_after_refusal,
                             " checks after the first refusal"));
  if (first_refusal == absl::InfiniteFuture()) {
    report_->Problem(
        "the disk was full for 30 s but NextRange never answered "
        "RESOURCE_EXHAUSTED or UNAVAILABLE");
  } else if (not_serving == 0) {
    report_->Problem(absl::StrFormat(
        "on a full disk health said SERVING at all %d checks after "
        "NextRange was first refused for space",
        checks_after_refusal));
  }
}

grpc::Status FaultInjector::CheckNewCollectionWhileFull(
    Node& node, const std::string& name) {
  hilo::v1::NextRangeResponse range;
  const grpc::Status s = NextRange(node, name, &range);
  if (RefusedForSpace(s)) {
    // NOT_FOUND is the answer: the refused call created no row. OK means
    // it left one behind; any other code is a read that failed on a full
    // disk, a problem of its own.
    hilo::v1::GetCollectionResponse got;
    grpc::Status g = GetCollection(node, name, &got);
    if (g.ok()) {
      report_->Problem(
          absl::StrFormat("refused NextRange(%s) left a row behind (max %d)",
                          name, got.collection().max()));
    } else if (g.error_code() != grpc::StatusCode::NOT_FOUND) {
      report_->Problem(
          absl::StrFormat("GetCollection(%s) on a full disk: %s %s", name,
                          CodeName(g.error_code()), g.error_message()));
    }
  } else if (!s.ok()) {
    report_->Problem(absl::StrFormat("NextRange on a full disk answered %s: %s",
                                     CodeName(s.error_code()),
                                     s.error_message()));
  }
  return s;
}

grpc::Status FaultInjector::CheckProbeWhileFull(Node& node,
                                                const std::string& probe,
                                                int64_t* known_max) {
  hilo::v1::NextRangeResponse range;
  const grpc::Status s = NextRange(node, probe, &range);
  if (s.ok()) {
    if (range.low() != *known_max + 1) {
      report_->Problem(absl::StrFormat(
          "on a full disk NextRange(%s) gave %d-%d; expected it to start "
          "at %d",
          probe, range.low(), range.high(), *known_max + 1));
    }
    *known_max = range.high();
  } else if (RefusedForSpace(s)) {
    hilo::v1::GetCollectionResponse got;
    grpc::Status g = GetCollection(node, probe, &got);
    if (!g.ok()) {
      report_->Problem(absl::StrFormat("GetCollection on a full disk: %s %s",
                                       CodeName(g.error_code()),
                                       g.error_message()));
    } else if (got.collection().max() != *known_max) {
      report_->Problem(
          absl::StrFormat("refused NextRange(%s) moved Max from %d to %d",
                          probe, *known_max, got.collection().max()));
      *known_max = got.collection().max();
    }
  } else {
    report_->Problem(absl::StrFormat("NextRange on a full disk answered %s: %s",
                                     CodeName(s.error_code()),
                                     s.error_message()));
  }
  return s;
}

bool FaultInjector::CheckReadsWhileFull(Node& node) {
  hilo::v1::ListCollectionsRequest list;
  list.set_page_size(10);
  hilo::v1::ListCollectionsResponse listed;
  grpc::Status l = CallWithDeadline(node.admin.get(),
                                    &hilo::v1::HiLoAdmin::Stub::ListCollections,
                                    list, &listed);
  bool serving = false;
  grpc::Status h = HealthCheck(node.channel, &serving, kAdminDeadline);
  // Reads and health keep answering (what health says: CheckWhileFull).
  if (!l.ok() || !h.ok()) {
    report_->Problem(absl::StrFormat(
        "on a full disk ListCollections answered %s and health %s",
        CodeName(l.error_code()), CodeName(h.error_code())));
  }
  return serving;
}

void FaultInjector::CheckAfterFreeing(Node& node, const std::string& probe,
                                      int64_t known_max) {
  // Allocation resumes right above the last range replied.
  const absl::Time freed = absl::Now();
  bool resumed = false;
  while (absl::Now() < freed + absl::Seconds(30)) {
    hilo::v1::NextRangeResponse range;
    const grpc::Status s = NextRange(node, probe, &range);
    if (s.ok()) {
      resumed = true;
      if (range.low() != known_max + 1) {
        report_->Problem(absl::StrFormat(
            "after the disk was freed NextRange(%s) gave %d-%d; expected it "
            "to start at %d",
            probe, range.low(), range.high(), known_max + 1));
      }
      break;
    }
    if (!RefusedForSpace(s)) {
      report_->Problem(
          absl::StrFormat("NextRange after freeing answered %s: %s",
                          CodeName(s.error_code()), s.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!resumed)
    report_->Problem("allocation did not resume within 30 s of freeing");
  report_->Note(
      absl::StrFormat("space freed; allocation resumed after %s",
                      absl::FormatDuration(absl::Trunc(
                          absl::Now() - freed, absl::Milliseconds(1)))));
}
}  // namespace hilo::stress
