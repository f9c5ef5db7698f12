#include "bench/delaying_proxy.h"

#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/client_context.h"

namespace hilo::bench {
namespace {

// The forwarded call's context: the same 30 s deadline as hilo_bench's own
// calls (rpc_calls.h), kept here so the proxy stands alone.
std::unique_ptr<grpc::ClientContext> NewContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
  return context;
}

}  // namespace

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

grpc::Status DelayingProxy::ReturnRanges(
    grpc::ServerContext*, const hilo::v1::ReturnRangesRequest* request,
    hilo::v1::ReturnRangesResponse* response) {
  absl::SleepFor(delay_);
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  return upstream_->ReturnRanges(context.get(), *request, response);
}

}  // namespace hilo::bench
