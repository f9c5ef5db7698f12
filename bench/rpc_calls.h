// The calls hilo_bench's ClosedLoop issues, over channels of its own to one
// server: NextRange as a fresh client asks it, and the no-op RPC beside it
// (grpc.health.v1.Health/Check), which shows what gRPC alone costs.
//
//   auto channels = MakeChannels(server->port(), 2);
//   NextRangeCalls calls(channels, 64, [](int64_t) { return "bench-one"; });
//   LoadResult r = ClosedLoop(64, calls.Issuer()).RunCount(1000);
//
// Every call has a deadline of kRpcDeadline. An issuer serves one
// ClosedLoop of at most `in_flight` slots and must outlive it.
#ifndef HILO_BENCH_RPC_CALLS_H_
#define HILO_BENCH_RPC_CALLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/closed_loop.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo::bench {

inline constexpr absl::Duration kRpcDeadline = absl::Seconds(30);

// `n` channels to 127.0.0.1:`port`, each its own TCP connection.
std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(int port, int n);

// A context with a deadline of kRpcDeadline from now.
std::unique_ptr<grpc::ClientContext> NewContext();

// Issues NextRange(name(seq)) as a fresh client would (no previous range);
// a reply below 1 counts as INTERNAL.
class NextRangeCalls {
 public:
  NextRangeCalls(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                 int in_flight, std::function<std::string(int64_t)> name);

  IssueFn Issuer();

 private:
  struct Call {
    std::unique_ptr<grpc::ClientContext> context;
    hilo::v1::NextRangeRequest request;
    hilo::v1::NextRangeResponse response;
  };
  const std::function<std::string(int64_t)> name_;
  std::vector<std::unique_ptr<hilo::v1::HiLo::Stub>> stubs_;
  std::vector<Call> calls_;
};

// Issues grpc.health.v1.Health/Check with hand-encoded bytes: an empty
// request; the first reply of each slot must be 08 01 (status: SERVING).
class HealthCheckCalls {
 public:
  HealthCheckCalls(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                   int in_flight);

  IssueFn Issuer();

 private:
  struct Call {
    std::unique_ptr<grpc::ClientContext> context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    bool checked = false;
  };
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::vector<Call> calls_;
};

}  // namespace hilo::bench

#endif  // HILO_BENCH_RPC_CALLS_H_
