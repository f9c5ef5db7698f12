// Helpers shared by the tests: scratch directories, in-process servers and
// gRPC stubs bound to 127.0.0.1:0.
#ifndef HILO_TESTS_TEST_UTIL_H_
#define HILO_TESTS_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hilo/base/mutex.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/server.h"

namespace hilo::testing {

// A one-shot event between threads, like absl::Notification, but visible to
// ThreadSanitizer (see hilo/base/mutex.h).
class Notification {
 public:
  void Notify() {
    base::MutexLock lock(&mu_);
    notified_ = true;
  }
  void WaitForNotification() {
    base::MutexLock lock(&mu_);
    mu_.Await([this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; });
  }

 private:
  base::Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Options for an in-process server on 127.0.0.1:0 with its database in
// `dir`; fails the test if it does not start.
ServerOptions TestServerOptions(const TempDir& dir,
                                const std::string& node_tag = "A");
std::unique_ptr<Server> StartServer(const ServerOptions& options);

std::string Address(int port);

// What a finished command printed and how it ended.
struct CommandResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with the arguments, waits for it, and returns what it
// printed. stdin is empty.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const TempDir& scratch);

// The body of http://127.0.0.1:<port><path>, or an error naming what failed.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
std::unique_ptr<hilo::v1::HiLo::Stub> NewStub(int port);

}  // namespace hilo::testing

#endif  // HILO_TESTS_TEST_UTIL_H_
