// hilo_server as a process: start-up line, clean exit on signals, and one
// clear line plus a non-zero exit for every kind of bad start.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

extern char** environ;

namespace hilo {
namespace {

using ::hilo::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A hilo_server child process with its stderr on a pipe. Killed on
// destruction if still running.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args) {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    // Never the fixed default metrics port: tests run side by side.
    if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
          return a.rfind("--metrics_listen=", 0) == 0;
        })) {
      args.push_back("--metrics_listen=127.0.0.1:0");
    }
    std::vector<char*> argv;
    args.insert(args.begin(), HILO_SERVER_PATH);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, HILO_SERVER_PATH, &actions, nullptr,
                          argv.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    stderr_ = fdopen(fds[0], "r");
  }

  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stderr_ != nullptr) fclose(stderr_);
  }

  // The next line of stderr without its newline; empty at end of file.
  std::string ReadLine() {
    char* line = nullptr;
    size_t capacity = 0;
    const ssize_t n = getline(&line, &capacity, stderr_);
    std::string result = n > 0 ? std::string(line, n) : "";
    free(line);
    if (!result.empty() && result.back() == '\n') result.pop_back();
    return result;
  }

  // All remaining stderr lines, until the process closes it.
  std::vector<std::string> ReadAllLines() {
    std::vector<std::string> lines;
    for (std::string line = ReadLine(); !line.empty(); line = ReadLine()) {
      lines.push_back(line);
    }
    return lines;
  }

  // Waits for exit; returns the exit code, or 128 + signal.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void Signal(int signal) { kill(pid_, signal); }

 private:
  pid_t pid_ = -1;
  FILE* stderr_ = nullptr;
};

// The port announced by a start-up line, or 0.
int PortFrom(const std::string& line) {
  const size_t at = line.find(" on port ");
  int port = 0;
  if (at == std::string::npos) return 0;
  const std::string rest = line.substr(at + 9);
  if (!absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &port)) return 0;
  return port;
}

TEST(ServerMainTest, ServesAfterOneStartLineAndExitsZeroOnSigterm) {
  TempDir dir;
  ServerProcess server(
      {"--listen=127.0.0.1:0", "--db=" + dir.File("d/h.db"), "--node_tag=Q7"});
  const std::string line = server.ReadLine();
  EXPECT_THAT(line, StartsWith("hilo_server: serving node Q7 on port "));
  EXPECT_THAT(line, HasSubstr("sync full"));
  const int port = PortFrom(line);
  ASSERT_GT(port, 0) << line;

  auto stub = testing::NewStub(port);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  hilo::v1::NextRangeResponse response;
  ASSERT_TRUE(stub->NextRange(&context, request, &response).ok());
  EXPECT_EQ(response.low(), 1);
  EXPECT_EQ(response.high(), 32);
  EXPECT_EQ(response.node_tag(), "Q7");

  server.Signal(SIGTERM);
  EXPECT_THAT(server.ReadAllLines(),
              ::testing::ElementsAre(HasSubstr("received; draining"),
                                     "hilo_server: stopped"));
  EXPECT_EQ(server.Wait(), 0);
}

TEST(ServerMainTest, SigintAlsoStopsCleanlyAndStateSurvives) {
  TempDir dir;
  const std::string db = "--db=" + dir.File("h.db");
  for (int64_t want_low : {1, 33}) {
    ServerProcess server({"--listen=127.0.0.1:0", db});
    const int port = PortFrom(server.ReadLine());
    ASSERT_GT(port, 0);
    auto stub = testing::NewStub(port);
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    hilo::v1::NextRangeResponse response;
    ASSERT_TRUE(stub->NextRange(&context, request, &response).ok());
    EXPECT_EQ(response.low(), want_low);
    server.Signal(SIGINT);
    EXPECT_EQ(server.Wait(), 0);
  }
}

struct BadStart {
  std::string label;
  std::vector<std::string> args;
  std::string message_part;
};

void PrintTo(const BadStart& c, std::ostream* os) { *os << c.label; }

class ServerMainBadStartTest : public ::testing::TestWithParam<BadStart> {};

TEST_P(ServerMainBadStartTest, PrintsOneClearLineAndExitsNonZero) {
  TempDir dir;
  std::ofstream(dir.File("garbage.db")) << std::string(8192, 'g');
  std::ofstream(dir.File("file")) << "x";
  std::vector<std::string> args;
  for (const std::string& a : GetParam().args) {
    std::string arg = a;
    const size_t at = arg.find("$DIR");
    if (at != std::string::npos) arg.replace(at, 4, dir.path());
    args.push_back(arg);
  }
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--db=", 0) == 0;
      })) {
    args.push_back("--db=" + dir.File("ok.db"));
  }
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--listen=", 0) == 0;
      })) {
    args.push_back("--listen=127.0.0.1:0");
  }
  ServerProcess server(args);
  const std::vector<std::string> lines = server.ReadAllLines();
  EXPECT_NE(server.Wait(), 0);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr(GetParam().message_part));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerMainBadStartTest,
    ::testing::Values(
        BadStart{"LowercaseNodeTag", {"--node_tag=a"}, "node tag \"a\""},
        BadStart{"LongNodeTag", {"--node_tag=ABCDE"}, "1 to 4"},
        BadStart{"UnknownFlag", {"--colour=red"}, "colour"},
        BadStart{"StrayArgument", {"serve"}, "unexpected argument \"serve\""},
        BadStart{"BadSync", {"--sync=sometimes"}, "sometimes"},
        BadStart{"MinAboveMax",
                 {"--min_range_size=64", "--max_range_size=32"},
                 "max range size 32 is below min range size 64"},
        BadStart{"ZeroMin", {"--min_range_size=0"}, "at least 1"},
        BadStart{"NotANumber", {"--max_batch=many"}, "max_batch"},
        BadStart{"GarbageDatabase", {"--db=$DIR/garbage.db"}, "not a database"},
        BadStart{"DatabaseUnderAFile",
                 {"--db=$DIR/file/hilo.db"},
                 "cannot create directory"},
        BadStart{"BadListenAddress",
                 {"--listen=256.1.1.1:99999"},
                 "cannot listen on 256.1.1.1:99999"},
        BadStart{"BadMetricsAddress",
                 {"--metrics_listen=nonsense"},
                 "cannot serve metrics on nonsense"},
        BadStart{"MissingAuthzPolicy",
                 {"--authz_policy=$DIR/none.textproto"},
                 "none.textproto cannot be read: No such file or directory"},
        BadStart{"TokensWithoutPolicy",
                 {"--authz_tokens=$DIR/file"},
                 "an authz token list needs an authz policy"},
        BadStart{"NegativeJump",
                 {"--max_last_max_jump=-1"},
                 "max last_max jump is -1; it must not be negative"},
        BadStart{"ZeroExhaustionShare",
                 {"--exhaustion_share=0"},
                 "exhaustion share is 0; it must be above 0 and at most 1"}),
    [](const ::testing::TestParamInfo<BadStart>& info) {
      return info.param.label;
    });

// NextRange on "orders" against the server on `port`, without credentials.
grpc::Status NextOrders(int port) {
  auto stub = testing::NewStub(port);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  hilo::v1::NextRangeResponse response;
  return stub->NextRange(&context, request, &response);
}

TEST(ServerMainTest, SighupReloadsThePolicyAndKeepsItOverABadFile) {
  TempDir dir;
  const std::string policy = dir.File("policy.textproto");
  std::ofstream(policy) << "grant { identity: \"anonymous\" "
                           "collections: \"orders\" }\n";
  ServerProcess server({"--listen=127.0.0.1:0", "--db=" + dir.File("h.db"),
                        "--authz_policy=" + policy, "--authz_reload_interval=0",
                        "--audit_log=" + dir.File("audit.jsonl")});
  const int port = PortFrom(server.ReadLine());
  ASSERT_GT(port, 0);
  ASSERT_TRUE(NextOrders(port).ok());

  std::ofstream(policy, std::ios::trunc) << "grant { identity: anonymous }\n";
  server.Signal(SIGHUP);
  EXPECT_EQ(server.ReadLine(),
            "hilo_server: authz policy " + policy +
                " line 1 column 19: Expected string, got: anonymous; keeping "
                "the policy in force");
  EXPECT_TRUE(NextOrders(port).ok());

  std::ofstream(policy, std::ios::trunc) << "grant { identity: \"cn:ops\" }\n";
  server.Signal(SIGHUP);
  EXPECT_EQ(server.ReadLine(),
            "hilo_server: authz policy " + policy + " reloaded");
  grpc::Status denied = NextOrders(port);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(),
            "anonymous may not call NextRange on collection \"orders\"");

  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
}

TEST(ServerMainTest, PortInUseIsOneClearLineAndNonZeroExit) {
  TempDir dir;
  ServerProcess first({"--listen=127.0.0.1:0", "--db=" + dir.File("a.db")});
  const int port = PortFrom(first.ReadLine());
  ASSERT_GT(port, 0);
  ServerProcess second(
      {"--listen=" + testing::Address(port), "--db=" + dir.File("b.db")});
  const std::vector<std::string> lines = second.ReadAllLines();
  EXPECT_NE(second.Wait(), 0);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0],
              HasSubstr("cannot listen on " + testing::Address(port)));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);
}

}  // namespace
}  // namespace hilo
