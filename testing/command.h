// RunCommand: run a program to its end and keep what it printed.
//
//   CommandResult r = RunCommand({"/usr/bin/openssl", "version"}, scratch);
//   if (r.exit_code == 0) use(r.out);
#ifndef HILO_TESTING_COMMAND_H_
#define HILO_TESTING_COMMAND_H_

#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace hilo::testing_util {

// What a finished command printed and how it ended.
struct CommandResult {
  int exit_code = -1;  // 128 + signal if killed; -1 if it never started
  std::string out;
  std::string err;  // if it never started, why
};

// Runs argv[0] (a path) with the arguments, with an empty stdin, and waits
// for it. Its output goes through files in `scratch`. Thread-compatible.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const TempDir& scratch);

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_COMMAND_H_
