// ReplyCoalescer (service/rpc/reply_coalescer.h) behind a real gRPC
// server: the peer address gRPC gives a call, over IPv4 and IPv6 (which
// gRPC 1.51 percent-encodes), leads to that call's socket. Kept apart from
// reply_coalescer_test.cc, which runs under ThreadSanitizer; gRPC's own
// code is not built for it. The coalescer's rules: that file.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hilo/base/monotonic_clock.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/rpc/reply_coalescer.h"
#include "service/store/completion_batch.h"

namespace hilo {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(10);

// A HiLo service whose NextRange, inside a batch of its own, tells `replies`
// of two replies to its caller (a caller is held from its second), and
// answers the corks and misses so far.
class CorkingService final : public hilo::v1::HiLo::CallbackService {
 public:
  explicit CorkingService(ReplyCoalescer* replies) : replies_(replies) {}
  grpc::ServerUnaryReactor* NextRange(
      grpc::CallbackServerContext* context, const hilo::v1::NextRangeRequest*,
      hilo::v1::NextRangeResponse* response) override {
    {
      CompletionBatch batch;
      replies_->BeforeReply(context->peer());
      replies_->BeforeReply(context->peer());
    }
    // A miss asked for a scan: the next call finds its socket known.
    EXPECT_TRUE(replies_->WaitForScansForTesting(kPatience));
    response->set_low(replies_->counts().corked);
    response->set_high(replies_->counts().not_found);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  ReplyCoalescer* const replies_;
};

// Corks made and sockets not found after two NextRange calls on one
// connection to a server on `host` (port 0), or nullopt when the host
// cannot be bound here.
std::optional<std::pair<int64_t, int64_t>> CorksOfTwoCallsOn(
    const std::string& host) {
  ReplyCoalescer replies({}, MonotonicClock::Get());
  CorkingService service(&replies);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(host, ":0"),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return std::nullopt;
  auto stub = hilo::v1::HiLo::NewStub(grpc::CreateChannel(
      absl::StrCat(host, ":", port), grpc::InsecureChannelCredentials()));
  hilo::v1::NextRangeResponse response;
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    const grpc::Status status =
        stub->NextRange(&context, hilo::v1::NextRangeRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  server->Shutdown();
  return std::make_pair(response.low(), response.high());
}

TEST(ReplyCoalescerTest, TheCallersPeerAsGrpcGivesItLeadsToItsSocket) {
  // The first call's end finds the socket, the second's reply corks it.
  EXPECT_EQ(CorksOfTwoCallsOn("127.0.0.1"),
            std::make_pair(int64_t{1}, int64_t{1}));
  // IPv6 where the machine has it; gRPC may write the address escaped.
  std::optional<std::pair<int64_t, int64_t>> v6 = CorksOfTwoCallsOn("[::1]");
  if (!v6.has_value()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(*v6, std::make_pair(int64_t{1}, int64_t{1}));
}

}  // namespace
}  // namespace hilo
