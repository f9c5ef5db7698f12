#include "hilo/base/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hilo::base {
namespace {

// Whether `flag` is one of Abseil's own (--flagfile, --helpfull, ...) rather
// than the program's.
bool IsAbseilFlag(const absl::CommandLineFlag& flag) {
  const std::string file = flag.Filename();
  return absl::StrContains(file, "absl/");
}

// "--name=default" (or "--name" for a boolean that is off), then the help
// text wrapped at 78 columns under it.
void AppendFlag(const absl::CommandLineFlag& flag, std::string* out) {
  std::string default_value = flag.DefaultValue();
  if (default_value == "false") {
    absl::StrAppend(out, "  --", flag.Name(), "\n");
  } else if (default_value.empty()) {
    absl::StrAppend(out, "  --", flag.Name(), "=  (default: empty)\n");
  } else {
    absl::StrAppend(out, "  --", flag.Name(), "=", default_value, "\n");
  }
  std::string line = "     ";
  for (absl::string_view word :
       absl::StrSplit(flag.Help(), ' ', absl::SkipEmpty())) {
    if (line.size() + 1 + word.size() > 78 && line.size() > 5) {
      absl::StrAppend(out, line, "\n");
      line = "     ";
    }
    absl::StrAppend(&line, " ", word);
  }
  absl::StrAppend(out, line, "\n");
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) return false;
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-help") == 0 ||
        std::strcmp(arg, "-h") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string HelpText(const std::string& usage,
                     const std::vector<FlagGroup>& groups) {
  const auto all = absl::GetAllFlags();
  std::string out = usage;
  if (!out.empty() && out.back() != '\n') out += '\n';
  std::set<std::string> shown;
  for (const FlagGroup& group : groups) {
    absl::StrAppend(&out, "\n", group.title, ":\n");
    for (const std::string& name : group.flags) {
      auto it = all.find(name);
      if (it == all.end()) continue;  // not linked into this program
      AppendFlag(*it->second, &out);
      shown.insert(name);
    }
  }
  std::vector<const absl::CommandLineFlag*> others;
  for (const auto& [name, flag] : all) {
    if (!IsAbseilFlag(*flag) && shown.count(std::string(name)) == 0) {
      others.push_back(flag);
    }
  }
  std::sort(others.begin(), others.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  if (!others.empty()) {
    absl::StrAppend(&out, "\nOther:\n");
    for (const absl::CommandLineFlag* flag : others) AppendFlag(*flag, &out);
  }
  absl::StrAppend(&out,
                  "\n--helpfull lists every flag, Abseil's own included; "
                  "--version prints the version.\n");
  return out;
}

std::vector<std::string> ParseCommandLine(
    int argc, char** argv, const std::string& program, const std::string& usage,
    const std::vector<FlagGroup>& groups) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig usage_config;
  usage_config.version_string = [program] {
    return absl::StrCat(program, " ", HILO_VERSION, "\n");
  };
  absl::SetFlagsUsageConfig(usage_config);
  if (AsksForHelp(argc, argv)) {
    const std::string text = HelpText(usage, groups);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    std::exit(0);
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  return std::vector<std::string>(positional.begin() + 1, positional.end());
}

}  // namespace hilo::base
