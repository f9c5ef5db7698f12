#include "hilo/base/command_line.h"

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"

namespace hilo::base {

std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          const std::string& program,
                                          const std::string& usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig usage_config;
  usage_config.version_string = [program] {
    return absl::StrCat(program, " ", HILO_VERSION, "\n");
  };
  absl::SetFlagsUsageConfig(usage_config);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  return std::vector<std::string>(positional.begin() + 1, positional.end());
}

}  // namespace hilo::base
