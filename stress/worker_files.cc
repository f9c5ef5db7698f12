#include "stress/worker_files.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hilo::stress {

std::string WorkerLogPath(const std::string& dir, int index) {
  return absl::StrCat(dir, "/worker-", index, ".log");
}

std::string WorkerResultPath(const std::string& dir, int index) {
  return absl::StrCat(dir, "/worker-", index, ".result");
}

absl::Status WriteWorkerResult(const std::string& path,
                               const WorkerResult& result) {
  std::ofstream out(path + ".tmp");
  out << "ids " << result.ids << "\n";
  out << "duplicates " << result.duplicates << "\n";
  out << "outside " << result.outside << "\n";
  for (const std::string& e : result.examples) out << "example " << e << "\n";
  for (const auto& [code, n] : result.errors) {
    out << "error " << code << " " << n << "\n";
  }
  if (!result.last_error.empty()) {
    out << "last_error " << result.last_error << "\n";
  }
  for (const auto& [code, n] : result.rpc_next) {
    out << "rpc_next " << code << " " << n << "\n";
  }
  for (const auto& [code, n] : result.rpc_return) {
    out << "rpc_return " << code << " " << n << "\n";
  }
  out << "return_failures " << result.return_failures << "\n";
  out << "last_ok_us "
      << (result.last_ok == absl::InfinitePast()
              ? 0
              : absl::ToUnixMicros(result.last_ok))
      << "\n";
  for (const IdLedger::Run& run : result.runs) {
    out << "run " << run.collection << " " << run.node_tag << " " << run.start
        << " " << run.count << "\n";
  }
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerResult> ReadWorkerResult(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no result file ", path));
  WorkerResult r;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    auto num = [&](size_t i) {
      int64_t v = 0;
      if (i < f.size()) (void)absl::SimpleAtoi(f[i], &v);
      return v;
    };
    if (f[0] == "ids") {
      r.ids = num(1);
    } else if (f[0] == "duplicates") {
      r.duplicates = num(1);
    } else if (f[0] == "outside") {
      r.outside = num(1);
    } else if (f[0] == "example") {
      r.examples.push_back(line.substr(8));
    } else if (f[0] == "error") {
      r.errors[num(1)] += num(2);
    } else if (f[0] == "rpc_next") {
      r.rpc_next[num(1)] += num(2);
    } else if (f[0] == "rpc_return") {
      r.rpc_return[num(1)] += num(2);
    } else if (f[0] == "return_failures") {
      r.return_failures = num(1);
    } else if (f[0] == "last_error") {
      r.last_error = line.substr(11);
    } else if (f[0] == "last_ok_us") {
      r.last_ok =
          num(1) == 0 ? absl::InfinitePast() : absl::FromUnixMicros(num(1));
    } else if (f[0] == "run" && f.size() == 5) {
      r.runs.push_back(IdLedger::Run{f[1], f[2], num(3), num(4)});
    }
  }
  return r;
}

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

}  // namespace hilo::stress
