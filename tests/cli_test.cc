// The `hilo` command-line tool against a live in-process server: output as a
// user and a script see it, and exit codes.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::CommandResult;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ =
        testing_util::StartServer(testing_util::TestServerOptions(dir_, "B"));
    ASSERT_NE(server_, nullptr);
  }

  CommandResult Hilo(std::vector<std::string> args) {
    args.insert(args.begin(),
                "--target=" + testing_util::Address(server_->port()));
    args.insert(args.begin(), HILO_CLI_PATH);
    return testing_util::RunCommand(args, dir_);
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
};

TEST_F(CliTest, NextPrintsDocumentIdsAndReturnsTheRest) {
  CommandResult r = Hilo({"next", "orders", "-n", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "orders/1-B\norders/2-B\norders/3-B\n");
  // The unused tail went back: the next run continues at 4.
  r = Hilo({"--json", "next", "orders"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[\"orders/4-B\"]}\n");
}

TEST_F(CliTest, GetShowsTheStoredRow) {
  ASSERT_EQ(Hilo({"next", "orders", "-n", "2"}).exit_code, 0);
  CommandResult r = Hilo({"--json", "get", "orders"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.out,
      MatchesRegex("\\{\"name\":\"orders\",\"max\":2,\"return_floor\":2,"
                   "\"updated_at\":\"[0-9T:.-]+Z\",\"node_tag\":\"B\"\\}\n"));
  r = Hilo({"get", "orders"});
  EXPECT_THAT(r.out, HasSubstr("orders\tmax 2\treturn_floor 2\t"));
}

TEST_F(CliTest, ListShowsEveryCollection) {
  ASSERT_EQ(Hilo({"next", "b"}).exit_code, 0);
  ASSERT_EQ(Hilo({"next", "a"}).exit_code, 0);
  CommandResult r = Hilo({"list"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex("a\tmax 1\t.*\nb\tmax 1\t.*\n"));
}

TEST_F(CliTest, SetFloorRaisesAndNextContinuesAbove) {
  CommandResult r = Hilo({"--json", "set-floor", "orders", "5000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"raised\":true,\"max\":5000}\n");
  EXPECT_EQ(Hilo({"next", "orders"}).out, "orders/5001-B\n");
  r = Hilo({"set-floor", "orders", "10"});
  EXPECT_EQ(r.out, "orders: max 5001 (already at or above the floor)\n");
}

TEST_F(CliTest, DeleteRemovesOnlyAnUnusedCollection) {
  ASSERT_EQ(Hilo({"set-floor", "typo", "0"}).exit_code, 0);
  CommandResult r = Hilo({"delete", "typo"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "typo: deleted\n");
  EXPECT_EQ(Hilo({"get", "typo"}).exit_code, 1);
  ASSERT_EQ(Hilo({"set-floor", "typo", "0"}).exit_code, 0);
  EXPECT_EQ(Hilo({"--json", "delete", "typo"}).out, "{\"deleted\":\"typo\"}\n");
  ASSERT_EQ(Hilo({"set-floor", "orders", "7"}).exit_code, 0);
  r = Hilo({"delete", "orders"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION: "));
  EXPECT_THAT(r.err, HasSubstr("collection \"orders\" has Max 7"));
  EXPECT_THAT(Hilo({"get", "orders"}).out, HasSubstr("orders\tmax 7\t"));
}

TEST_F(CliTest, RetireFreesTheNameAndItsNumbersNeverRepeat) {
  ASSERT_EQ(Hilo({"next", "orders", "-n", "3"}).out,
            "orders/1-B\norders/2-B\norders/3-B\n");
  CommandResult r = Hilo({"retire", "orders"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "orders: retired at Max 3\n");
  // Gone from the node's rows...
  r = Hilo({"get", "orders"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Hilo({"list"}).out, "");
  // ...and its numbers never come back.
  EXPECT_EQ(Hilo({"next", "orders"}).out, "orders/4-B\n");
  EXPECT_EQ(Hilo({"--json", "retire", "orders"}).out,
            "{\"retired\":\"orders\",\"max\":4}\n");
  EXPECT_EQ(Hilo({"next", "orders", "-n", "2"}).out,
            "orders/5-B\norders/6-B\n");
}

TEST_F(CliTest, RetireOfAnUnknownOrBadNameExitsOneAndChangesNothing) {
  ASSERT_EQ(Hilo({"next", "orders"}).exit_code, 0);
  CommandResult r = Hilo({"retire", "missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("hilo: NOT_FOUND: "));
  EXPECT_THAT(r.err, HasSubstr("collection \"missing\" has no row; there is "
                               "nothing to retire"));
  r = Hilo({"retire", std::string(257, 'x')});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(Hilo({"list"}).out, MatchesRegex("orders\tmax 1\t.*\n"));
}

TEST_F(CliTest, HealthPrintsServing) {
  CommandResult r = Hilo({"health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  EXPECT_EQ(Hilo({"--json", "health"}).out, "{\"status\":\"SERVING\"}\n");
}

TEST_F(CliTest, ServerErrorsExitOneWithCodeAndMessage) {
  CommandResult r = Hilo({"get", "missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("hilo: NOT_FOUND: "));
  EXPECT_THAT(r.err, HasSubstr("\"missing\""));
  r = Hilo({"next", ""});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
}

TEST_F(CliTest, UnreachableServerExitsOneNamingItAndWhatToCheck) {
  TempDir scratch;
  CommandResult r = testing_util::RunCommand(
      {HILO_CLI_PATH, "--target=127.0.0.1:1", "--timeout=2s", "health"},
      scratch);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("hilo: UNAVAILABLE: 127.0.0.1:1"));
  EXPECT_THAT(r.err, HasSubstr("; is hilo_server running on 127.0.0.1:1? "
                               "Check --target"));
}

// Run without the fixture's --target.
CommandResult HiloAlone(std::vector<std::string> args) {
  TempDir scratch;
  args.insert(args.begin(), HILO_CLI_PATH);
  return testing_util::RunCommand(args, scratch);
}

TEST_F(CliTest, TargetPortOutOfRangeIsUsageNotAWrappedPort) {
  // gRPC would dial 80000 - 65536 = 14464.
  CommandResult r = HiloAlone({"--target=127.0.0.1:80000", "health"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("hilo: --target=127.0.0.1:80000: port 80000 "
                               "is out of range: a port is 0 to 65535"));
  EXPECT_THAT(r.err, Not(HasSubstr("UNAVAILABLE")));
}

TEST_F(CliTest, TargetWithoutPortIsUsageNotPort443) {
  // gRPC would dial localhost:443.
  CommandResult r = HiloAlone({"--target=localhost", "health"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("hilo: --target=localhost: it has no port; "
                               "give HOST:PORT, such as 127.0.0.1:50051"));
  EXPECT_THAT(r.err, Not(HasSubstr("UNAVAILABLE")));
  r = HiloAlone({"--target=::1", "health"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("an IPv6 address goes in brackets"));
}

TEST_F(CliTest, FlagMistakesExitTwoSayingWhat) {
  CommandResult r = Hilo({"next", "orders", "-n", "abc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "hilo: \"abc\" is not a valid value for --n (--help says what "
            "it takes)\n");
  r = Hilo({"--jsno", "health"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "hilo: unknown flag --jsno; did you mean --json? (--help lists "
            "every flag)\n");
  r = Hilo({"--colour=red", "health"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "hilo: unknown flag --colour (--help lists every flag)\n");
}

TEST_F(CliTest, BadUsageExitsTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"get"},
                                             {"set-floor", "x", "many"},
                                             {"delete"},
                                             {"delete", "a", "b"},
                                             {"retire"},
                                             {"retire", "a", "b"},
                                             {"next", "orders", "-n", "0"}}) {
    CommandResult r = Hilo(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args);
    EXPECT_THAT(r.err, HasSubstr("usage: hilo"));
  }
}

}  // namespace
}  // namespace hilo
