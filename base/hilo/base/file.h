// ReadPemFile: the whole of a small file (a certificate, a key), or an error
// naming the file and what it was for.
#ifndef HILO_BASE_FILE_H_
#define HILO_BASE_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hilo::base {

// UNAVAILABLE if `path` cannot be read; INVALID_ARGUMENT if it is empty.
// `what` names the file's role in messages, e.g. "TLS key".
inline absl::StatusOr<std::string> ReadPemFile(const std::string& path,
                                               absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", what, " file ", path));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file ", path, " is empty"));
  }
  return contents.str();
}

}  // namespace hilo::base

#endif  // HILO_BASE_FILE_H_
