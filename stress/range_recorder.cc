#include "stress/range_recorder.h"

#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"
#include "hilo/v1/hilo.pb.h"

namespace hilo::stress {
namespace {

using ::grpc::experimental::InterceptionHookPoints;

constexpr char kNextRange[] = "/hilo.v1.HiLo/NextRange";
constexpr char kReturnRange[] = "/hilo.v1.HiLo/ReturnRange";

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

class RecordingInterceptor final : public grpc::experimental::Interceptor {
 public:
  RecordingInterceptor(RangeRecorder* recorder, bool next_range)
      : recorder_(recorder), next_range_(next_range) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (next_range_) {
        next_request_ = SentMessage<hilo::v1::NextRangeRequest>(methods);
      } else {
        return_request_ = SentMessage<hilo::v1::ReturnRangeRequest>(methods);
        if (return_request_.has_value()) {
          // Before the request leaves: an applied return is always logged.
          recorder_->Add(RangeEvent::ReturnIntent(
              return_request_->collection(), return_request_->node_tag(),
              return_request_->end(), return_request_->last(),
              return_request_->range_token()));
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage(); m != nullptr) {
        if (next_range_) {
          next_response_ = *static_cast<hilo::v1::NextRangeResponse*>(m);
        } else {
          return_response_ = *static_cast<hilo::v1::ReturnRangeResponse*>(m);
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_STATUS)) {
      const grpc::Status* status = methods->GetRecvStatus();
      const int code = status != nullptr ? status->error_code() : -1;
      if (next_range_) {
        recorder_->CountNextRange(code);
        if (code == 0 && next_request_.has_value() &&
            next_response_.has_value()) {
          recorder_->Add(RangeEvent::Range(
              next_request_->collection(), next_response_->node_tag(),
              next_response_->low(), next_response_->high(),
              next_response_->range_token()));
        }
      } else {
        recorder_->CountReturnRange(code);
        if (return_request_.has_value()) {
          recorder_->Add(RangeEvent::ReturnOutcome(
              return_request_->collection(), return_request_->node_tag(),
              return_request_->end(), return_request_->last(),
              return_request_->range_token(), code,
              code == 0 && return_response_.has_value() &&
                  return_response_->applied()));
        }
      }
    }
    methods->Proceed();
  }

 private:
  RangeRecorder* const recorder_;
  const bool next_range_;
  std::optional<hilo::v1::NextRangeRequest> next_request_;
  std::optional<hilo::v1::NextRangeResponse> next_response_;
  std::optional<hilo::v1::ReturnRangeRequest> return_request_;
  std::optional<hilo::v1::ReturnRangeResponse> return_response_;
};

class RecordingFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RecordingFactory(RangeRecorder* recorder) : recorder_(recorder) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    const std::string method = info->method() != nullptr ? info->method() : "";
    if (method == kNextRange) return new RecordingInterceptor(recorder_, true);
    if (method == kReturnRange) {
      return new RecordingInterceptor(recorder_, false);
    }
    return nullptr;
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
