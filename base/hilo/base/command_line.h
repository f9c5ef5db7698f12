// ParseCommandLine: the start of every hilo program's main (hilo,
// hilo_server), so that --help and --version read alike in each.
//
//   int main(int argc, char** argv) {
//     std::vector<std::string> args = hilo::base::ParseCommandLine(
//         argc, argv, "hilo", "usage: hilo [--target=HOST:PORT] COMMAND");
//     ...
#ifndef HILO_BASE_COMMAND_LINE_H_
#define HILO_BASE_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace hilo::base {

// Parses the flags of the program (absl::ParseCommandLine: an unknown or
// malformed flag prints why and exits with status 1). --help prints `usage`
// first; --version prints "<program> <hilo's version>". Returns the
// arguments that are not flags, without argv[0]. Call once, from main,
// before any other thread starts.
std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          const std::string& program,
                                          const std::string& usage);

}  // namespace hilo::base

#endif  // HILO_BASE_COMMAND_LINE_H_
