#include "service/access/line_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/base/mutex.h"

namespace hilo {

struct LineWriter::State {
  State(int fd, bool owns_fd, LineWriterOptions options)
      : fd(fd), owns_fd(owns_fd), options(std::move(options)) {}

  const int fd;
  const bool owns_fd;
  const LineWriterOptions options;

  base::Mutex mu;
  std::deque<std::string> queue ABSL_GUARDED_BY(mu);
  // Bytes queued, the batch the thread is writing included.
  size_t queued_bytes ABSL_GUARDED_BY(mu) = 0;
  // Lines ever queued, and of those the ones the thread is done with.
  int64_t queued_lines ABSL_GUARDED_BY(mu) = 0;
  int64_t done_lines ABSL_GUARDED_BY(mu) = 0;
  // Dropped and not yet said in the stream; said once the lines queued
  // before the first of them are written (queued_lines then).
  int64_t dropped_unsaid ABSL_GUARDED_BY(mu) = 0;
  int64_t say_dropped_after ABSL_GUARDED_BY(mu) = 0;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::atomic<int64_t> dropped_total{0};

  base::Mutex listeners_mu;
  std::map<int64_t, std::function<void()>> listeners
      ABSL_GUARDED_BY(listeners_mu);
  int64_t next_listener ABSL_GUARDED_BY(listeners_mu) = 0;
};

namespace {

// errno's text, or "" when `data` was all written.
std::string WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    if (n == 0) return "nothing written";
    data.remove_prefix(static_cast<size_t>(n));
  }
  return "";
}

}  // namespace

LineWriter::LineWriter(int fd, bool owns_fd, LineWriterOptions options)
    : state_(std::make_shared<State>(fd, owns_fd, std::move(options))),
      thread_(&LineWriter::Run, state_) {}

LineWriter::~LineWriter() {
  State& s = *state_;
  bool finished;
  {
    base::MutexLock lock(&s.mu);
    s.stopping = true;
    finished = s.mu.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.finished; },
        s.options.close_timeout);
  }
  // A thread still blocked in write(2) keeps the state alive; it ends with
  // the process if the reader never comes back.
  if (finished) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

bool LineWriter::Write(absl::string_view line) {
  State& s = *state_;
  {
    base::MutexLock lock(&s.mu);
    const size_t size = line.size() + 1;
    if (s.queued_bytes + size <= s.options.max_queued_bytes) {
      s.queue.push_back(absl::StrCat(line, "\n"));
      s.queued_bytes += size;
      ++s.queued_lines;
      return true;
    }
    if (s.dropped_unsaid == 0) s.say_dropped_after = s.queued_lines;
    ++s.dropped_unsaid;
  }
  s.dropped_total.fetch_add(1, std::memory_order_relaxed);
  if (s.options.on_dropped) s.options.on_dropped();
  base::MutexLock lock(&s.listeners_mu);
  for (const auto& [id, listener] : s.listeners) listener();
  return false;
}

bool LineWriter::WaitUntilWritten(absl::Duration timeout) {
  State& s = *state_;
  base::MutexLock lock(&s.mu);
  const int64_t target = s.queued_lines;
  return s.mu.AwaitWithTimeout(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.done_lines >= target || s.finished;
      },
      timeout);
}

int64_t LineWriter::dropped() const {
  return state_->dropped_total.load(std::memory_order_relaxed);
}

std::unique_ptr<LineWriter::DropListener> LineWriter::AddDropListener(
    std::function<void()> listener) {
  State& s = *state_;
  base::MutexLock lock(&s.listeners_mu);
  const int64_t id = s.next_listener++;
  s.listeners.emplace(id, std::move(listener));
  return std::unique_ptr<DropListener>(new DropListener(state_, id));
}

LineWriter::DropListener::~DropListener() {
  base::MutexLock lock(&state_->listeners_mu);
  state_->listeners.erase(id_);
}

void LineWriter::Run(std::shared_ptr<State> state) {
  State& s = *state;
  bool failing = false;
  const auto write = [&](absl::string_view data) {
    const std::string error = WriteAll(s.fd, data);
    if (error.empty()) {
      failing = false;
    } else if (!failing) {
      failing = true;
      if (s.options.on_write_error) s.options.on_write_error(error);
    }
  };
  for (;;) {
    std::deque<std::string> batch;
    {
      base::MutexLock lock(&s.mu);
      s.mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.stopping || !s.queue.empty() || s.dropped_unsaid > 0;
      });
      if (s.queue.empty() && s.dropped_unsaid == 0) break;  // stopping
      batch.swap(s.queue);
    }
    size_t bytes = 0;
    for (const std::string& line : batch) {
      write(line);
      bytes += line.size();
    }
    int64_t dropped = 0;
    {
      base::MutexLock lock(&s.mu);
      s.queued_bytes -= bytes;
      s.done_lines += static_cast<int64_t>(batch.size());
      if (s.done_lines >= s.say_dropped_after) {
        dropped = s.dropped_unsaid;
        s.dropped_unsaid = 0;
      }
    }
    // Caught up with what was queued before the lines were dropped: said
    // once, about where they are missing.
    if (dropped > 0) {
      write(absl::StrCat(
          s.options.dropped_line
              ? s.options.dropped_line(dropped)
              : absl::StrFormat("hilo_server: %d log lines dropped while the "
                                "log was not read (more than %d bytes "
                                "queued)",
                                dropped, s.options.max_queued_bytes),
          "\n"));
    }
  }
  if (s.owns_fd) ::close(s.fd);
  base::MutexLock lock(&s.mu);
  s.finished = true;
}

LineWriter& StderrLines() {
  static LineWriter* const writer =
      new LineWriter(STDERR_FILENO, /*owns_fd=*/false, LineWriterOptions());
  return *writer;
}

}  // namespace hilo
