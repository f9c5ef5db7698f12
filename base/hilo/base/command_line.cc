#include "hilo/base/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
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

// Edit distance between a and b: insertions, deletions, substitutions
// and swaps of two neighbours ("jsno" is one from "json").
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// `name` lower-cased without '_' and '-': "node-tag", "nodetag" and
// "NODE_TAG" all read "nodetag".
std::string Folded(absl::string_view name) {
  std::string folded;
  for (char c : name) {
    if (c != '_' && c != '-') folded += absl::ascii_tolower(c);
  }
  return folded;
}

// Abseil's flags that read other flags from elsewhere. CheckFlags reads
// --flagfile's files itself; with any other of them on the command line it
// leaves every judgement to Abseil.
bool IsGeneratorFlag(absl::string_view name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv" ||
         name == "undefok";
}

// Abseil's usage flags (--version, --helpfull, ...), which it reads apart
// from the registered flags.
bool IsUsageFlag(absl::string_view name) {
  return absl::StartsWith(name, "help") || name == "version" ||
         name == "only_check_args";
}

// The flag `name` names, as Abseil finds it: "noNAME" is NAME=false for a
// boolean NAME.
const absl::CommandLineFlag* FindFlag(absl::string_view name, bool* negated) {
  *negated = false;
  if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name)) {
    return flag;
  }
  if (absl::StartsWith(name, "no")) {
    const absl::CommandLineFlag* flag =
        absl::FindCommandLineFlag(name.substr(2));
    if (flag != nullptr && flag->IsOfType<bool>()) {
      *negated = true;
      return flag;
    }
  }
  return nullptr;
}

// What is wrong with one flag argument (`name`, and its value if it has
// one), or "" if nothing is.
std::string CheckFlag(absl::string_view name,
                      std::optional<absl::string_view> value) {
  bool negated = false;
  const absl::CommandLineFlag* flag = FindFlag(name, &negated);
  if (flag == nullptr) {
    const std::string nearest = NearestFlag(name);
    return absl::StrCat("unknown flag --", name,
                        nearest.empty()
                            ? std::string()
                            : absl::StrCat("; did you mean --", nearest, "?"),
                        " (--help lists every flag)");
  }
  if (IsAbseilFlag(*flag)) return "";  // --help and the like: Abseil's
  if (negated) {
    return value.has_value() ? absl::StrCat("--", name, " takes no value")
                             : std::string();
  }
  if (!value.has_value()) {
    return flag->IsOfType<bool>()
               ? std::string()
               : absl::StrCat("--", name, " needs a value (--", name,
                              "=VALUE)");
  }
  std::string error;
  // Sets the flag as Abseil will when it parses the same argument.
  if (const_cast<absl::CommandLineFlag*>(flag)->ParseFrom(*value, &error)) {
    return "";
  }
  // Abseil's own error repeats the value and the name; a type's parser
  // may say more ("Failed to parse ...").
  const bool says_more = !error.empty() && !absl::StartsWith(error, "Illegal");
  return absl::StrCat("\"", *value, "\" is not a valid value for --", name,
                      says_more ? ": " : "", says_more ? error : "",
                      " (--help says what it takes)");
}

// One flag argument: its name without the dashes, its value if it has one,
// and the flagfile it was read from ("" for the command line).
struct FlagArgument {
  std::string name;
  std::optional<std::string> value;
  std::string file;
};

// "--name=value", "-name" or "--name" (`arg` starts with '-').
FlagArgument SplitFlagArgument(absl::string_view arg, absl::string_view file) {
  arg.remove_prefix(arg.size() > 1 && arg[1] == '-' ? 2 : 1);
  FlagArgument flag;
  flag.file = std::string(file);
  const size_t equals = arg.find('=');
  flag.name = std::string(arg.substr(0, equals));
  if (equals != absl::string_view::npos) {
    flag.value = std::string(arg.substr(equals + 1));
  }
  return flag;
}

// Nested --flagfile lines deeper than this, files larger than this, and
// more files than this in all (a file may name others many times over) are
// left to Abseil.
constexpr int kMaxFlagfileDepth = 8;
constexpr std::streamsize kMaxFlagfileBytes = 1 << 20;
constexpr int kMaxFlagfilesRead = 64;

// Appends the flags of the flagfiles `paths` (comma-separated, as Abseil
// reads --flagfile: one flag per line, '#' comments and blank lines
// skipped) to `flags`, nested --flagfile lines expanded. False when the
// check is better left to Abseil: a file it cannot read (Abseil then says
// so), too deep, too large, or a line that reads flags from elsewhere.
// Only a regular file is read: a pipe (bash's <(...), /dev/stdin) can be
// read once, and Abseil would then find it empty, and a FIFO with no
// writer left would block Abseil's open for ever.
// `files_left` counts down the files that may still be read.
bool ReadFlagfiles(absl::string_view paths, int depth, int* files_left,
                   std::vector<FlagArgument>* flags) {
  if (depth > kMaxFlagfileDepth) return false;
  for (absl::string_view path : absl::StrSplit(paths, ',', absl::SkipEmpty())) {
    if (--*files_left < 0) return false;
    std::error_code error;
    if (!std::filesystem::is_regular_file(std::string(path), error)) {
      return false;
    }
    std::ifstream in{std::string(path)};
    std::string text(static_cast<size_t>(kMaxFlagfileBytes) + 1, '\0');
    in.read(text.data(), kMaxFlagfileBytes + 1);
    if (in.bad() || (in.fail() && !in.eof()) ||
        in.gcount() > kMaxFlagfileBytes) {
      return false;
    }
    text.resize(static_cast<size_t>(in.gcount()));
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || line[0] == '#') continue;
      if (line[0] != '-') return false;  // Abseil refuses it, and says why
      FlagArgument flag = SplitFlagArgument(line, path);
      if (flag.name == "flagfile") {
        if (!flag.value.has_value() ||
            !ReadFlagfiles(*flag.value, depth + 1, files_left, flags)) {
          return false;
        }
      } else if (IsGeneratorFlag(flag.name)) {
        return false;
      } else if (!IsUsageFlag(flag.name)) {
        flags->push_back(std::move(flag));
      }
    }
  }
  return true;
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

std::string NearestFlag(absl::string_view name) {
  const std::string folded = Folded(name);
  std::string best;
  size_t best_distance = 0;
  for (const auto& [flag_name, flag] : absl::GetAllFlags()) {
    if (IsAbseilFlag(*flag)) continue;
    const size_t distance = EditDistance(folded, Folded(flag_name));
    if (best.empty() || distance < best_distance ||
        (distance == best_distance && flag_name < best)) {
      best = std::string(flag_name);
      best_distance = distance;
    }
  }
  // A third of the name may be wrong (at least one character, at most
  // three): "nodetag" is --node_tag, "colour" is nothing.
  const size_t allowed = std::clamp<size_t>(folded.size() / 3, 1, 3);
  return best_distance <= allowed ? best : std::string();
}

std::string CheckFlags(int argc, char** argv) {
  std::vector<FlagArgument> flags;
  int files_left = kMaxFlagfilesRead;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // not a flag
    FlagArgument flag = SplitFlagArgument(arg, "");
    if (!flag.value.has_value() && !IsUsageFlag(flag.name)) {
      // "--n 3": a flag that is not a boolean takes the next argument.
      bool negated = false;
      const absl::CommandLineFlag* known = FindFlag(flag.name, &negated);
      if (((known != nullptr && !known->IsOfType<bool>() && !negated) ||
           flag.name == "flagfile") &&
          i + 1 < argc) {
        flag.value = argv[++i];
      }
    }
    if (flag.name == "flagfile") {
      if (!flag.value.has_value() ||
          !ReadFlagfiles(*flag.value, /*depth=*/0, &files_left, &flags)) {
        return "";
      }
      continue;
    }
    if (IsGeneratorFlag(flag.name)) return "";
    if (IsUsageFlag(flag.name)) continue;
    flags.push_back(std::move(flag));
  }
  for (const FlagArgument& flag : flags) {
    std::string problem = CheckFlag(flag.name, flag.value);
    if (problem.empty()) continue;
    return flag.file.empty() ? problem : absl::StrCat(flag.file, ": ", problem);
  }
  return "";
}

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

std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          const std::string& program,
                                          const std::string& usage,
                                          const std::vector<FlagGroup>& groups,
                                          int usage_exit_code) {
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
  if (const std::string problem = CheckFlags(argc, argv); !problem.empty()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), problem.c_str());
    std::exit(usage_exit_code);
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  return std::vector<std::string>(positional.begin() + 1, positional.end());
}

}  // namespace hilo::base
