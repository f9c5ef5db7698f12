// ParseCommandLine: the start of every hilo program's main (hilo,
// hilo_server), so that --help and --version read alike in each.
//
//   int main(int argc, char** argv) {
//     std::vector<std::string> args = hilo::base::ParseCommandLine(
//         argc, argv, "hilo", "usage: hilo [--target=HOST:PORT] COMMAND",
//         {{"Connection", {"target", "timeout"}}, {"Output", {"json"}}});
//     ...
#ifndef HILO_BASE_COMMAND_LINE_H_
#define HILO_BASE_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hilo::base {

// A topic of --help and the names of its flags, in the order shown.
struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;
};

// Parses the flags of the program (absl::ParseCommandLine). An unknown flag
// or a value its flag cannot take prints one line saying so ("hilo:
// unknown flag --nodetag; did you mean --node_tag? ...", see CheckFlags)
// and exits with `usage_exit_code`. --help (or -h) prints
// `usage`, then the program's own flags by `groups`, each with its default
// and help text, to stdout and exits 0; a flag of the program's that no
// group names is listed under "Other" (a test keeps that section empty).
// --helpfull lists every flag, Abseil's own included. --version prints
// "<program> <hilo's version>". Returns the arguments that are not flags,
// without argv[0]. Call once, from main, before any other thread starts.
std::vector<std::string> ParseCommandLine(
    int argc, char** argv, const std::string& program, const std::string& usage,
    const std::vector<FlagGroup>& groups = {}, int usage_exit_code = 1);

// What is wrong with the flags of `argv`, read as Abseil reads them ("--n
// 3" and "--n=3", "--nojson"), or "" if nothing is: the first unknown flag
// with the nearest known one, a value its flag cannot take, or a missing
// value. The flags of --flagfile's files are checked too (the problem then
// starts with the file's path); a command line that reads flags from
// elsewhere (--fromenv, --tryfromenv, --undefok), or a flagfile that cannot
// be read, is left to Abseil. Sets the flags it checks, as parsing them
// would.
std::string CheckFlags(int argc, char** argv);

// The program's flag (not one of Abseil's) nearest to `name`, ignoring case,
// '_' and '-', if at most a third of it differs; "" if none is that near.
std::string NearestFlag(absl::string_view name);

// The text --help prints (see ParseCommandLine).
std::string HelpText(const std::string& usage,
                     const std::vector<FlagGroup>& groups);

}  // namespace hilo::base

#endif  // HILO_BASE_COMMAND_LINE_H_
