#include "stress/range_recorder.h"

#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"
#include "hilo/v1/hilo.pb.h"

namespace hilo::stress {
namespace {

using ::grpc::experimental::InterceptionHookPoints;

constexpr char kNextRange[] = "/hilo.v1.HiLo/NextRange";
constexpr char kReturnRange[] = "/hilo.v1.HiLo/ReturnRange";
constexpr char kReturnRanges[] = "/hilo.v1.HiLo/ReturnRanges";

// The request of a call, whether the send path still has the object or
// already serialized it.
template <typename Message>
std::optional<Message> SentMessage(
    grpc::experimental::InterceptorBatchMethods* methods) {
  if (const void* m = methods->GetSendMessage(); m != nullptr) {
    return *static_cast<const Message*>(m);
  }
  grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage();
  if (buffer == nullptr) return std::nullopt;
  grpc::Slice slice;
  if (!buffer->TrySingleSlice(&slice).ok() &&
      !buffer->DumpToSingleSlice(&slice).ok()) {
    return std::nullopt;
  }
  Message message;
  if (!message.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return std::nullopt;
  }
  return message;
}

// Records the calls of one RPC. hilo::Client hands ranges back with
// ReturnRange one at a time or with ReturnRanges in batches; each item of a
// batch is logged as a return of its own, with its own outcome, exactly as
// a single ReturnRange would be.
class RecordingInterceptor final : public grpc::experimental::Interceptor {
 public:
  enum class Kind { kNextRange, kReturnRange, kReturnRanges, kOther };

  RecordingInterceptor(RangeRecorder* recorder, Kind kind)
      : recorder_(recorder), kind_(kind) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      OnSend(methods);
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage(); m != nullptr) OnReceive(m);
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_STATUS)) {
      const grpc::Status* status = methods->GetRecvStatus();
      OnStatus(status != nullptr ? status->error_code() : -1);
    }
    methods->Proceed();
  }

 private:
  void OnSend(grpc::experimental::InterceptorBatchMethods* methods) {
    switch (kind_) {
      case Kind::kNextRange:
        next_request_ = SentMessage<hilo::v1::NextRangeRequest>(methods);
        break;
      case Kind::kReturnRange:
        if (std::optional<hilo::v1::ReturnRangeRequest> r =
                SentMessage<hilo::v1::ReturnRangeRequest>(methods)) {
          returns_.push_back(*std::move(r));
        }
        break;
      case Kind::kReturnRanges:
        if (std::optional<hilo::v1::ReturnRangesRequest> r =
                SentMessage<hilo::v1::ReturnRangesRequest>(methods)) {
          returns_.assign(r->returns().begin(), r->returns().end());
        }
        break;
      case Kind::kOther:
        return;
    }
    // Before the request leaves: an applied return is always logged.
    for (const hilo::v1::ReturnRangeRequest& r : returns_) {
      recorder_->Add(RangeEvent::ReturnIntent(
          r.collection(), r.node_tag(), r.end(), r.last(), r.range_token()));
    }
  }

  void OnReceive(void* message) {
    switch (kind_) {
      case Kind::kNextRange:
        next_response_ = *static_cast<hilo::v1::NextRangeResponse*>(message);
        break;
      case Kind::kReturnRange: {
        const auto& reply =
            *static_cast<hilo::v1::ReturnRangeResponse*>(message);
        hilo::v1::ReturnRangeResult result;
        result.set_applied(reply.applied());
        results_ = {result};
        break;
      }
      case Kind::kReturnRanges: {
        const auto& reply =
            *static_cast<hilo::v1::ReturnRangesResponse*>(message);
        results_.assign(reply.results().begin(), reply.results().end());
        break;
      }
      case Kind::kOther:
        break;
    }
  }

  void OnStatus(int code) {
    if (kind_ == Kind::kNextRange) {
      recorder_->CountNextRange(code);
      if (code == 0 && next_request_.has_value() &&
          next_response_.has_value()) {
        recorder_->Add(RangeEvent::Range(
            next_request_->collection(), next_response_->node_tag(),
            next_response_->low(), next_response_->high(),
            next_response_->range_token()));
      }
      return;
    }
    for (size_t i = 0; i < returns_.size(); ++i) {
      const hilo::v1::ReturnRangeRequest& r = returns_[i];
      // A refused call refuses every item; otherwise each has its own code.
      const bool have_result = code == 0 && i < results_.size();
      const int item_code =
          code != 0 ? code : (have_result ? results_[i].code() : -1);
      recorder_->CountReturnRange(item_code);
      recorder_->Add(RangeEvent::ReturnOutcome(
          r.collection(), r.node_tag(), r.end(), r.last(), r.range_token(),
          item_code, have_result && item_code == 0 && results_[i].applied()));
    }
  }

  RangeRecorder* const recorder_;
  const Kind kind_;
  std::optional<hilo::v1::NextRangeRequest> next_request_;
  std::optional<hilo::v1::NextRangeResponse> next_response_;
  std::vector<hilo::v1::ReturnRangeRequest> returns_;
  std::vector<hilo::v1::ReturnRangeResult> results_;
};

class RecordingFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RecordingFactory(RangeRecorder* recorder) : recorder_(recorder) {}

  // Never null: gRPC 1.51 calls a global factory's interceptor without
  // checking, so every other method gets one that only proceeds.
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    using Kind = RecordingInterceptor::Kind;
    const absl::string_view method =
        info->method() != nullptr ? info->method() : "";
    Kind kind = Kind::kOther;
    if (method == kNextRange) kind = Kind::kNextRange;
    if (method == kReturnRange) kind = Kind::kReturnRange;
    if (method == kReturnRanges) kind = Kind::kReturnRanges;
    return new RecordingInterceptor(recorder_, kind);
  }

 private:
  RangeRecorder* const recorder_;
};

}  // namespace

RangeRecorder* RangeRecorder::Install() {
  static RangeRecorder* const recorder = [] {
    auto* r = new RangeRecorder();
    grpc::experimental::RegisterGlobalClientInterceptorFactory(
        new RecordingFactory(r));
    return r;
  }();
  return recorder;
}

void RangeRecorder::SetLogFd(int fd) {
  base::MutexLock lock(&mu_);
  fd_ = fd;
}

std::vector<RangeEvent> RangeRecorder::Events() const {
  base::MutexLock lock(&mu_);
  return events_;
}

void RangeRecorder::Clear() {
  base::MutexLock lock(&mu_);
  events_.clear();
}

std::map<int, int64_t> RangeRecorder::NextRangeCodes() const {
  base::MutexLock lock(&mu_);
  return next_codes_;
}

std::map<int, int64_t> RangeRecorder::ReturnRangeCodes() const {
  base::MutexLock lock(&mu_);
  return return_codes_;
}

void RangeRecorder::Add(const RangeEvent& event) {
  base::MutexLock lock(&mu_);
  events_.push_back(event);
  if (fd_ >= 0) {
    // One write per line; a reader takes only lines ending in a newline.
    const std::string line = FormatEvent(event);
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
}

void RangeRecorder::CountNextRange(int code) {
  base::MutexLock lock(&mu_);
  ++next_codes_[code];
}

void RangeRecorder::CountReturnRange(int code) {
  base::MutexLock lock(&mu_);
  ++return_codes_[code];
}

}  // namespace hilo::stress
