#include "testing/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace hilo::testing_util {

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      base != nullptr && *base != '\0' ? base : "/tmp", "/hilo-test-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "TempDir: mkdtemp %s: %s\n", pattern.c_str(),
                 strerror(errno));
    abort();
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

}  // namespace hilo::testing_util
