// TempDir: a scratch directory that goes away with everything in it; and
// reading or writing a whole file in it.
//
//   TempDir dir;
//   std::string db = dir.File("hilo.db");
//   WriteFile(dir.File("policy.textproto"), "grant { ... }");
//
// Not thread-safe to destroy while another thread uses the directory.
#ifndef HILO_TESTING_TEMP_DIR_H_
#define HILO_TESTING_TEMP_DIR_H_

#include <string>

namespace hilo::testing_util {

class TempDir {
 public:
  // A fresh directory under $TMPDIR (or /tmp). Aborts, saying why, if none
  // can be made: nothing that needs one can go on without it.
  TempDir();
  // Removes the directory and everything in it.
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `path()` + "/" + `name`.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The whole contents of the file at `path`; empty if it cannot be read.
std::string ReadFile(const std::string& path);

// Makes the file at `path` hold exactly `text`, creating it if need be.
void WriteFile(const std::string& path, const std::string& text);

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_TEMP_DIR_H_
