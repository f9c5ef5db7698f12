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

namespace hilo::base {

// A topic of --help and the names of its flags, in the order shown.
struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;
};

// Parses the flags of the program (absl::ParseCommandLine: an unknown or
// malformed flag prints why and exits with status 1). --help (or -h) prints
// `usage`, then the program's own flags by `groups`, each with its default
// and help text, to stdout and exits 0; a flag of the program's that no
// group names is listed under "Other" (a test keeps that section empty).
// --helpfull lists every flag, Abseil's own included. --version prints
// "<program> <hilo's version>". Returns the arguments that are not flags,
// without argv[0]. Call once, from main, before any other thread starts.
std::vector<std::string> ParseCommandLine(
    int argc, char** argv, const std::string& program, const std::string& usage,
    const std::vector<FlagGroup>& groups = {});

// The text --help prints (see ParseCommandLine).
std::string HelpText(const std::string& usage,
                     const std::vector<FlagGroup>& groups);

}  // namespace hilo::base

#endif  // HILO_BASE_COMMAND_LINE_H_
