#include "testing/command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace hilo::testing_util {

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const TempDir& scratch) {
  static std::atomic<int> counter{0};
  const std::string base = scratch.File(absl::StrCat("cmd", ++counter));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO,
                                   (base + ".out").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO,
                                   (base + ".err").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  CommandResult result;
  pid_t pid = -1;
  const int error =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    result.err = absl::StrCat("cannot start ", argv[0], ": ", strerror(error));
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(base + ".out");
  result.err = ReadFile(base + ".err");
  return result;
}

}  // namespace hilo::testing_util
