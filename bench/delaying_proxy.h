// DelayingProxy: the network of a client whose server is far away, for
// hilo_bench's client latency runs. A HiLo service that sleeps `delay`,
// then forwards the call to a real server and returns its answer.
// hilo_bench runs it in-process; hilo_delaying_proxy (delaying_proxy_main.cc)
// runs it alone, for the other languages' client benchmarks.
//
//   DelayingProxy proxy(MakeChannels(port, 1)[0], absl::Milliseconds(2));
//   builder.RegisterService(&proxy);
//
// Thread-safe: gRPC calls it from many threads.
#ifndef HILO_BENCH_DELAYING_PROXY_H_
#define HILO_BENCH_DELAYING_PROXY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo::bench {

class DelayingProxy final : public hilo::v1::HiLo::Service {
 public:
  DelayingProxy(std::shared_ptr<grpc::Channel> upstream, absl::Duration delay);

  grpc::Status NextRange(grpc::ServerContext*,
                         const hilo::v1::NextRangeRequest* request,
                         hilo::v1::NextRangeResponse* response) override;
  grpc::Status ReturnRange(grpc::ServerContext*,
                           const hilo::v1::ReturnRangeRequest* request,
                           hilo::v1::ReturnRangeResponse* response) override;
  grpc::Status ReturnRanges(grpc::ServerContext*,
                            const hilo::v1::ReturnRangesRequest* request,
                            hilo::v1::ReturnRangesResponse* response) override;

  // NextRange calls forwarded so far.
  int64_t next_range_calls() const { return next_range_calls_.load(); }

 private:
  const std::unique_ptr<hilo::v1::HiLo::Stub> upstream_;
  const absl::Duration delay_;
  std::atomic<int64_t> next_range_calls_{0};
};

}  // namespace hilo::bench

#endif  // HILO_BENCH_DELAYING_PROXY_H_
