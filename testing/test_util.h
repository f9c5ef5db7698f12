// Helpers the GoogleTest suites share beyond hilo::testing (hilo::test_util):
// in-process servers and gRPC stubs bound to 127.0.0.1:0, a fixture with a
// throwaway CA, a plain HTTP GET, and a Notification ThreadSanitizer can
// see.
#ifndef HILO_TESTING_TEST_UTIL_H_
#define HILO_TESTING_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/server.h"
#include "service/store/sqlite/sqlite_range_store.h"
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
  // True if notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; },
        timeout);
  }
  bool HasBeenNotified() {
    base::MutexLock lock(&mu_);
    return notified_;
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

// An SQLite store in file `name` of `dir`, with sync=normal (a test
// survives no power loss); fails the test and returns null if it does not
// open.
std::unique_ptr<SqliteRangeStore> OpenTestStore(const TempDir& dir,
                                                const std::string& name);

// Runs the shell commands `commands` (which call openssl to make a test CA
// and certificates) with `dir` as the working directory, under `set -e`,
// their output going to dir/openssl.log. FailedPrecondition if openssl is
// not installed; Internal, naming the log, if a command failed.
absl::Status MakeTestCertificates(const TempDir& dir,
                                  const std::string& commands);

// A fixture whose tests share one throwaway CA and its certificates, made
// once per suite. A suite derives from it and calls MakeCertificates from
// its own SetUpTestSuite. If they could not be made, every test of the
// suite fails in SetUp (a derived SetUp calls this one first): openssl comes
// with scripts/install-deps.sh, so a missing one is an error, not a skip.
// GoogleTest runs suites one after another, so the suites of one binary that
// derive from this take turns with its one set of certificates.
class CertificateTest : public ::testing::Test {
 protected:
  // Runs `commands` (see MakeTestCertificates) in a new scratch directory.
  static void MakeCertificates(const std::string& commands);
  static void TearDownTestSuite();
  void SetUp() override;

  // The path of `name` in the directory the commands ran in.
  static std::string Pki(const std::string& name);

  // TestServerOptions(dir) for a server that speaks TLS with server.pem and
  // server.key; with `mtls`, clients must also present a certificate signed
  // by ca.pem. If they cannot be read, fails the test and leaves
  // credentials null.
  static ServerOptions TlsServerOptions(const TempDir& dir, bool mtls);

 private:
  static inline TempDir* pki_ = nullptr;
  // Why the certificates could not be made; empty if they were.
  static inline std::string make_error_;
};

// The body of http://127.0.0.1:<port><path>, or an error naming what failed.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
std::unique_ptr<hilo::v1::HiLo::Stub> NewStub(int port);

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_TEST_UTIL_H_
