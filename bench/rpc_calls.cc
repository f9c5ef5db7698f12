#include "bench/rpc_calls.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace hilo::bench {
namespace {

constexpr absl::string_view kHealthCheckMethod = "/grpc.health.v1.Health/Check";

}  // namespace

std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(int port, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("hilo_bench.channel", i);
    channels.push_back(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

std::unique_ptr<grpc::ClientContext> NewContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoSeconds(kRpcDeadline));
  return context;
}

NextRangeCalls::NextRangeCalls(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, int in_flight,
    std::function<std::string(int64_t)> name)
    : name_(std::move(name)), calls_(in_flight) {
  for (const auto& channel : channels) {
    stubs_.push_back(hilo::v1::HiLo::NewStub(channel));
  }
}

IssueFn NextRangeCalls::Issuer() {
  return [this](int slot, int64_t seq, Done done) {
    Call& call = calls_[slot];
    call.context = NewContext();
    call.request.set_collection(name_(seq));
    call.response.Clear();
    stubs_[slot % stubs_.size()]->async()->NextRange(
        call.context.get(), &call.request, &call.response,
        [&call, done = std::move(done)](grpc::Status status) {
          if (status.ok() && call.response.low() < 1) {
            status = grpc::Status(grpc::StatusCode::INTERNAL,
                                  "NextRange returned a range below 1");
          }
          done(std::move(status));
        });
  };
}

HealthCheckCalls::HealthCheckCalls(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, int in_flight)
    : calls_(in_flight) {
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
}

IssueFn HealthCheckCalls::Issuer() {
  return [this](int slot, int64_t seq, Done done) {
    Call& call = calls_[slot];
    call.context = NewContext();
    grpc::Slice empty("", 0);
    call.request = grpc::ByteBuffer(&empty, 1);
    call.response.Clear();
    stubs_[slot % stubs_.size()]->UnaryCall(
        call.context.get(), std::string(kHealthCheckMethod),
        grpc::StubOptions(), &call.request, &call.response,
        [&call, done = std::move(done)](grpc::Status status) {
          if (status.ok() && !call.checked) {
            call.checked = true;
            grpc::Slice reply;
            if (!call.response.DumpToSingleSlice(&reply).ok() ||
                reply.size() != 2 || reply.begin()[0] != 0x08 ||
                reply.begin()[1] != 0x01) {
              status = grpc::Status(grpc::StatusCode::INTERNAL,
                                    "Health/Check did not answer SERVING");
            }
          }
          done(std::move(status));
        });
  };
}

}  // namespace hilo::bench
