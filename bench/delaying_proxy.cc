#include "bench/delaying_proxy.h"

#include <utility>

#include "absl/time/clock.h"
#include "bench/rpc_calls.h"

namespace hilo::bench {

DelayingProxy::DelayingProxy(std::shared_ptr<grpc::Channel> upstream,
                             absl::Duration delay)
    : upstream_(hilo::v1::HiLo::NewStub(upstream)), delay_(delay) {}

grpc::Status DelayingProxy::NextRange(grpc::ServerContext*,
                                      const hilo::v1::NextRangeRequest* request,
                                      hilo::v1::NextRangeResponse* response) {
  next_range_calls_.fetch_add(1);
  absl::SleepFor(delay_);
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  return upstream_->NextRange(context.get(), *request, response);
}

grpc::Status DelayingProxy::ReturnRange(
    grpc::ServerContext*, const hilo::v1::ReturnRangeRequest* request,
    hilo::v1::ReturnRangeResponse* response) {
  absl::SleepFor(delay_);
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  return upstream_->ReturnRange(context.get(), *request, response);
}

}  // namespace hilo::bench
