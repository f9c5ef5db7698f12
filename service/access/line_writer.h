// LineWriter: writes lines to a file descriptor on a thread of its own, so
// that the thread with a line to write (a gRPC thread refusing a call)
// never waits for the reader. stderr read by a stalled log collector fills
// its pipe in seconds, and then every write(2) to it blocks: with the lines
// written by request threads, a node stopped serving (issue 36 item 2).
//
//   LineWriter writer(fd, /*owns_fd=*/true, {});
//   writer.Write("{\"time\":...}");  // returns at once
//
// Write queues the line and returns; the writer thread writes queued lines
// in order, each with its own write(2) (a line of up to PIPE_BUF bytes is
// never interleaved with another writer's on a pipe). The queue holds at
// most `max_queued_bytes`; a line that would pass it is dropped and counted
// (Write returns false, `on_dropped` runs), and once the writer has caught
// up (its queue empty) it writes one line saying how many it dropped
// (`dropped_line`). A failed write(2) (a full disk) loses its line and is
// reported once through `on_write_error`, again only after a write worked
// in between.
//
// The destructor waits up to `close_timeout` for the queue to be written,
// then lets the thread go: a writer blocked for good on a pipe nobody reads
// ends with the process, never holding up the one destroying it.
//
// Thread-safe.
#ifndef HILO_SERVICE_ACCESS_LINE_WRITER_H_
#define HILO_SERVICE_ACCESS_LINE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hilo {

// What a writer queues at most by default: 1 MiB, about 3,800 refusal lines
// of the audit log (270 bytes each), so 38 s of anonymous refusals at
// their default budget (100 lines a second) and 5.8 s at the most they can
// write (1.8 KB lines, 180 KB/s), before a line is dropped.
inline constexpr size_t kDefaultMaxQueuedLogBytes = 1 << 20;

struct LineWriterOptions {
  size_t max_queued_bytes = kDefaultMaxQueuedLogBytes;
  // The line (without its newline) that says `count` lines were dropped,
  // written once the writer has caught up after drops. Runs on the writer
  // thread, perhaps after the writer is destroyed: capture nothing it may
  // outlive. Empty: "hilo_server: N log lines dropped while the log was
  // not read".
  std::function<std::string(int64_t count)> dropped_line;
  // Runs on the thread that called Write, for each line dropped (e.g. to
  // count it in a metric). May be empty.
  std::function<void()> on_dropped;
  // Runs on the writer thread when a write(2) fails after one that worked
  // (or the first), with a message naming the error. Capture nothing it
  // may outlive. May be empty.
  std::function<void(const std::string& message)> on_write_error;
  absl::Duration close_timeout = absl::Seconds(1);
};

class LineWriter {
 public:
  // Writes to `fd`, which the writer closes when its thread ends if
  // `owns_fd`.
  LineWriter(int fd, bool owns_fd, LineWriterOptions options);
  ~LineWriter();

  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Queues `line` and a newline; false if the queue had no room for it
  // (the line is dropped and counted).
  bool Write(absl::string_view line);

  // Waits until every line queued before the call has been written (or
  // has failed to be), for at most `timeout`; whether it was.
  bool WaitUntilWritten(absl::Duration timeout);

  // Lines dropped since the writer started.
  int64_t dropped() const;

  // Calls `listener` on the dropping thread for each line dropped while
  // the returned handle lives (the handle's destructor waits for a call
  // in progress). For a writer many owners share, such as StderrLines().
  class DropListener;
  std::unique_ptr<DropListener> AddDropListener(std::function<void()> listener);

 private:
  struct State;
  static void Run(std::shared_ptr<State> state);

  // Shared with the thread, which may outlive the writer.
  std::shared_ptr<State> state_;
  std::thread thread_;
};

class LineWriter::DropListener {
 public:
  ~DropListener();
  DropListener(const DropListener&) = delete;
  DropListener& operator=(const DropListener&) = delete;

 private:
  friend class LineWriter;
  DropListener(std::shared_ptr<State> state, int64_t id)
      : state_(std::move(state)), id_(id) {}
  std::shared_ptr<State> state_;
  const int64_t id_;
};

// The process's stderr, through one LineWriter that lives as long as the
// process: what hilo_server logs while it serves goes here, never to
// stderr directly from a request thread.
LineWriter& StderrLines();

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_LINE_WRITER_H_
