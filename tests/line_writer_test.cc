// LineWriter: lines written by a thread of its own, so a writer never waits
// for the reader; a bounded queue, drops counted and said once in the
// stream when the writer catches up; bounded waits everywhere. The reader
// is a pipe of one page whose read end the test holds: a stalled log
// collector until the test reads it.
#include "service/access/line_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hilo {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A pipe whose write end holds `pipe_bytes` and is full: a write to it
// blocks until the test reads.
class StalledPipe {
 public:
  explicit StalledPipe(int pipe_bytes = 4096) {
    EXPECT_EQ(::pipe2(fds_, O_CLOEXEC), 0);
    EXPECT_GE(::fcntl(fds_[1], F_SETPIPE_SZ, pipe_bytes), pipe_bytes);
    // Fill it without blocking, then make the write end blocking again, as
    // stderr is.
    ::fcntl(fds_[1], F_SETFL, O_NONBLOCK);
    const std::string block(4096, '.');
    while (::write(fds_[1], block.data(), block.size()) > 0) {
      filled_ += block.size();
    }
    // A partial page may fit too.
    while (::write(fds_[1], ".", 1) == 1) ++filled_;
    ::fcntl(fds_[1], F_SETFL, 0);
  }
  ~StalledPipe() {
    if (fds_[0] >= 0) ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  // The write end; the caller owns it after TakeWriteEnd.
  int write_end() const { return fds_[1]; }
  int TakeWriteEnd() {
    const int fd = fds_[1];
    fds_[1] = -1;
    return fd;
  }
  // Reads until the write end is closed, or until `lines` complete lines
  // have arrived after the filling dots and the lines read before; those
  // lines, without newlines.
  std::vector<std::string> ReadLines(size_t lines = SIZE_MAX) {
    char buffer[4096];
    for (;;) {
      if (text_.size() >= filled_ &&
          static_cast<size_t>(std::count(text_.begin() + filled_, text_.end(),
                                         '\n')) >= lines) {
        break;
      }
      const ssize_t n = ::read(fds_[0], buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text_.append(buffer, static_cast<size_t>(n));
    }
    EXPECT_GE(text_.size(), filled_);
    std::string read = text_.substr(std::min(filled_, text_.size()));
    text_.clear();
    filled_ = 0;
    return absl::StrSplit(read, '\n', absl::SkipEmpty());
  }

 private:
  int fds_[2] = {-1, -1};
  // Bytes of dots to skip, and what was read.
  size_t filled_ = 0;
  std::string text_;
};

// 99 bytes and a newline: ten fill a queue of 1,000 bytes exactly.
std::string Line(int i) {
  std::string line = absl::StrCat("line ", i, " ");
  line.resize(99, 'x');
  return line;
}

TEST(LineWriterTest, WritesEveryLineInOrder) {
  StalledPipe pipe;
  std::vector<std::string> expected;
  {
    LineWriter writer(pipe.TakeWriteEnd(), /*owns_fd=*/true, {});
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(writer.Write(Line(i)));
      expected.push_back(Line(i));
    }
    // The writer closes its end when it is done: then the read ends.
    std::vector<std::string> lines = pipe.ReadLines(expected.size());
    EXPECT_THAT(lines, ElementsAreArray(expected));
    EXPECT_EQ(writer.dropped(), 0);
  }
}

// The reader stalls: Write returns at once, queues up to the bound, drops
// and counts the rest; once the reader is back the queued lines come, then
// one line saying how many were dropped, then what is written after.
TEST(LineWriterTest, StalledReaderDropsPastTheBoundAndSaysSoOnceCaughtUp) {
  StalledPipe pipe;
  LineWriterOptions options;
  options.max_queued_bytes = 1000;
  int on_dropped = 0;
  options.on_dropped = [&] { ++on_dropped; };
  LineWriter writer(pipe.write_end(), /*owns_fd=*/false, options);
  std::atomic<int> heard{0};
  std::unique_ptr<LineWriter::DropListener> listener =
      writer.AddDropListener([&] { ++heard; });
  std::vector<std::string> expected;
  // Ten fit, whether the thread has taken some of them (blocked writing
  // them) or not: a line counts until it is written.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(writer.Write(Line(i)));
    expected.push_back(Line(i));
  }
  for (int i = 10; i < 15; ++i) EXPECT_FALSE(writer.Write(Line(i)));
  EXPECT_EQ(writer.dropped(), 5);
  EXPECT_EQ(on_dropped, 5);
  EXPECT_EQ(heard, 5);
  listener.reset();
  EXPECT_FALSE(writer.Write(Line(15)));
  EXPECT_EQ(heard, 5);  // no longer listening
  EXPECT_EQ(writer.dropped(), 6);
  // Bounded: the reader has not come back.
  EXPECT_FALSE(writer.WaitUntilWritten(absl::Milliseconds(50)));

  expected.push_back(
      "hilo_server: 6 log lines dropped while the log was not read (more "
      "than 1000 bytes queued)");
  EXPECT_THAT(pipe.ReadLines(expected.size()), ElementsAreArray(expected));
  EXPECT_TRUE(writer.WaitUntilWritten(absl::Seconds(30)));
  EXPECT_TRUE(writer.Write("after"));
  EXPECT_TRUE(writer.WaitUntilWritten(absl::Seconds(30)));
  EXPECT_THAT(pipe.ReadLines(1), ElementsAre("after"));
}

TEST(LineWriterTest, DroppedLineIsTheOwnersToWrite) {
  StalledPipe pipe;
  LineWriterOptions options;
  options.max_queued_bytes = 100;
  options.dropped_line = [](int64_t count) {
    return absl::StrCat("{\"dropped\":{\"count\":", count, "}}");
  };
  LineWriter writer(pipe.write_end(), /*owns_fd=*/false, options);
  EXPECT_TRUE(writer.Write(Line(0)));
  EXPECT_FALSE(writer.Write(Line(1)));
  EXPECT_THAT(pipe.ReadLines(2),
              ElementsAre(Line(0), "{\"dropped\":{\"count\":1}}"));
}

// A reader gone for good must not hold up whoever destroys the writer: the
// destructor waits close_timeout, then leaves the thread to finish if the
// reader ever comes back (here it does, and every line arrives).
TEST(LineWriterTest, DestroyingAWriterStalledForGoodDoesNotWaitForIt) {
  StalledPipe pipe;
  LineWriterOptions options;
  options.close_timeout = absl::Milliseconds(50);
  auto writer = std::make_unique<LineWriter>(pipe.TakeWriteEnd(),
                                             /*owns_fd=*/true, options);
  EXPECT_TRUE(writer->Write(Line(0)));
  EXPECT_TRUE(writer->Write(Line(1)));
  writer.reset();
  // The thread closes the write end once it has written them: the read
  // then ends.
  EXPECT_THAT(pipe.ReadLines(), ElementsAre(Line(0), Line(1)));
}

TEST(LineWriterTest, AFailedWriteIsReportedOnceUntilOneWorks) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<std::string> errors;
  LineWriterOptions options;
  options.on_write_error = [&](const std::string& error) {
    errors.push_back(error);
  };
  {
    LineWriter writer(fd, /*owns_fd=*/true, options);
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(writer.Write(Line(i)));
    EXPECT_TRUE(writer.WaitUntilWritten(absl::Seconds(30)));
    EXPECT_EQ(writer.dropped(), 0);  // lost, not dropped
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("No space left on device"));
}

}  // namespace
}  // namespace hilo
