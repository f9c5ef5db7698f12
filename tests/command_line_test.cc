// CheckFlags and NearestFlag (base/hilo/base/command_line.h): a mistyped
// flag gets the nearest known one, a bad value says so, in-process against
// flags of this test's own.
#include "hilo/base/command_line.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

ABSL_FLAG(std::string, node_tag, "", "a flag to be mistyped");
ABSL_FLAG(bool, json, false, "a boolean");
ABSL_FLAG(int64_t, n, 1, "a number");

namespace hilo::base {
namespace {

std::string Check(std::vector<std::string> args) {
  args.insert(args.begin(), "program");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return CheckFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLineTest, GoodFlagsPass) {
  EXPECT_EQ(Check({"--node_tag=B", "--json", "-n", "3", "next", "orders"}), "");
  EXPECT_EQ(Check({"--nojson", "--n=7", "--", "--not_a_flag"}), "");
  EXPECT_EQ(Check({"--version"}), "");
}

TEST(CommandLineTest, UnknownFlagSuggestsTheNearest) {
  EXPECT_EQ(Check({"--nodetag=B"}),
            "unknown flag --nodetag; did you mean --node_tag? (--help lists "
            "every flag)");
  EXPECT_EQ(Check({"--node-tag", "B"}),
            "unknown flag --node-tag; did you mean --node_tag? (--help lists "
            "every flag)");
  EXPECT_EQ(Check({"--jsno"}),
            "unknown flag --jsno; did you mean --json? (--help lists every "
            "flag)");
  EXPECT_EQ(Check({"--colour=red"}),
            "unknown flag --colour (--help lists every flag)");
}

TEST(CommandLineTest, BadOrMissingValueIsNamed) {
  EXPECT_EQ(Check({"next", "orders", "-n", "abc"}),
            "\"abc\" is not a valid value for --n (--help says what it takes)");
  EXPECT_EQ(Check({"--json=maybe"}),
            "\"maybe\" is not a valid value for --json (--help says what it "
            "takes)");
  EXPECT_EQ(Check({"--node_tag"}),
            "--node_tag needs a value (--node_tag=VALUE)");
  EXPECT_EQ(Check({"--nojson=1"}), "--nojson takes no value");
}

TEST(CommandLineTest, FlagsFromElsewhereAreLeftToAbseil) {
  EXPECT_EQ(Check({"--flagfile=/nonexistent", "--nodetag=B"}), "");
  EXPECT_EQ(Check({"--fromenv=node_tag", "--nodetag=B"}), "");
}

TEST(CommandLineTest, FlagfileLinesAreCheckedNamingTheFile) {
  testing_util::TempDir dir;
  const std::string outer = dir.File("outer.flags");
  const std::string inner = dir.File("inner.flags");
  testing_util::WriteFile(
      outer, "# a comment\n\n  --json\n--flagfile=" + inner + "\n");
  testing_util::WriteFile(inner, "--n=4\n--nodetag=B\n");
  EXPECT_EQ(Check({"--flagfile", outer}),
            inner +
                ": unknown flag --nodetag; did you mean --node_tag? "
                "(--help lists every flag)");
  testing_util::WriteFile(inner, "--n=abc\n");
  EXPECT_EQ(Check({"--flagfile=" + outer}),
            inner +
                ": \"abc\" is not a valid value for --n (--help says "
                "what it takes)");
  testing_util::WriteFile(inner, "--n=5\n--node_tag=C\n");
  EXPECT_EQ(Check({"--flagfile=" + outer, "--json"}), "");
  // The file's flags were read as Abseil will read them.
  EXPECT_EQ(absl::GetFlag(FLAGS_n), 5);
  EXPECT_EQ(absl::GetFlag(FLAGS_node_tag), "C");
  // A flagfile that nests itself is left to Abseil, not followed for ever.
  testing_util::WriteFile(inner, "--flagfile=" + inner + "\n");
  EXPECT_EQ(Check({"--flagfile=" + outer, "--nodetag=B"}), "");
}

// Review (review40): a flagfile that is a pipe (bash's <(...), /dev/stdin)
// can be read once. The check read it to its end, so Abseil then found it
// empty: a boolean flag in it (--create_db) was lost without a word, and a
// FIFO left the server blocked for ever in Abseil's open. Only a regular
// file may be read twice; anything else is left to Abseil, unread.
TEST(CommandLineTest, FlagfilesThatFanOutAreLeftToAbseil) {
  // Each file names the next one 50 times: 50^7 reads if followed.
  testing_util::TempDir dir;
  for (int level = 0; level < 7; ++level) {
    std::string text;
    for (int k = 0; k < 50; ++k) {
      absl::StrAppend(
          &text, "--flagfile=", dir.File(absl::StrCat("f", level + 1)), "\n");
    }
    testing_util::WriteFile(dir.File(absl::StrCat("f", level)), text);
  }
  testing_util::WriteFile(dir.File("f7"), "--nodetag=B\n");
  EXPECT_EQ(Check({"--flagfile=" + dir.File("f0")}), "");
  // One file naming another a few times is still read.
  testing_util::WriteFile(dir.File("g1"), "--nodetag=B\n");
  testing_util::WriteFile(
      dir.File("g0"),
      "--flagfile=" + dir.File("g1") + "\n--flagfile=" + dir.File("g1") + "\n");
  EXPECT_EQ(Check({"--flagfile=" + dir.File("g0")}),
            dir.File("g1") +
                ": unknown flag --nodetag; did you mean --node_tag? (--help "
                "lists every flag)");
}

TEST(CommandLineTest, FlagfileThatIsAPipeIsLeftUnread) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string text = "--json\n--nodetag=B\n";
  ASSERT_EQ(write(fds[1], text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  close(fds[1]);
  EXPECT_EQ(Check({"--flagfile=/dev/fd/" + std::to_string(fds[0])}), "");
  std::string left(text.size() + 1, '\0');
  const ssize_t n = read(fds[0], left.data(), left.size());
  close(fds[0]);
  ASSERT_GE(n, 0);
  left.resize(static_cast<size_t>(n));
  EXPECT_EQ(left, text) << "the check consumed what Abseil must read";
}

}  // namespace
}  // namespace hilo::base
