// Helpers the GoogleTest suites share beyond hilo::testing (testing/):
// in-process servers and gRPC stubs bound to 127.0.0.1:0, a plain HTTP GET,
// and a Notification ThreadSanitizer can see.
#ifndef HILO_TESTS_TEST_UTIL_H_
#define HILO_TESTS_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hilo/base/mutex.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/server.h"
#include "testing/command.h"
#include "testing/temp_dir.h"

namespace hilo::testing_util {

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

// Options for an in-process server on 127.0.0.1:0 with its database in
// `dir`; fails the test if it does not start.
ServerOptions TestServerOptions(const TempDir& dir,
                                const std::string& node_tag = "A");
std::unique_ptr<Server> StartServer(const ServerOptions& options);

std::string Address(int port);

// Runs the shell commands `commands` (which call openssl to make a test CA
// and certificates) with `dir` as the working directory, under `set -e`,
// their output going to dir/openssl.log. FailedPrecondition if openssl is
// not installed; Internal, naming the log, if a command failed.
absl::Status MakeTestCertificates(const TempDir& dir,
                                  const std::string& commands);

// The body of http://127.0.0.1:<port><path>, or an error naming what failed.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
std::unique_ptr<hilo::v1::HiLo::Stub> NewStub(int port);

}  // namespace hilo::testing_util

#endif  // HILO_TESTS_TEST_UTIL_H_
