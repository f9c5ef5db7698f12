#include "client_cpp/src/grpc_range_source.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client_cpp/src/attribution.h"
#include "client_cpp/src/collection_name.h"
#include "hilo/v1/conversions.h"

namespace hilo::internal {
namespace {

// OK, or what is wrong with a NextRange reply (CONTRACT.md R11), given what
// the client holds of the collection (PreviousRange::held).
absl::Status CheckReply(const hilo::v1::NextRangeResponse& response,
                        const PreviousRange& previous) {
  if (response.low() < 1 || response.high() < response.low()) {
    return absl::InternalError(
        absl::StrFormat("NextRange replied with the invalid range [%d, %d]",
                        response.low(), response.high()));
  }
  // high - low cannot overflow: low >= 1.
  if (response.high() - response.low() >= kMaxRangeSize) {
    return absl::InternalError(absl::StrFormat(
        "NextRange replied with the range [%d, %d] of %d numbers; a client "
        "takes at most %d in one range",
        response.low(), response.high(),
        static_cast<uint64_t>(response.high() - response.low()) + 1,
        kMaxRangeSize));
  }
  const google::protobuf::Timestamp& at = response.range_at();
  if (at.seconds() < kMinTimestampSeconds ||
      at.seconds() > kMaxTimestampSeconds || at.nanos() < 0 ||
      at.nanos() > 999'999'999) {
    return absl::InternalError(absl::StrFormat(
        "NextRange replied with range_at %d s %d ns, which is not a valid "
        "Timestamp (0001-01-01 to 9999-12-31)",
        at.seconds(), at.nanos()));
  }
  if (!IsValidNodeTag(response.node_tag())) {
    return absl::InternalError(absl::StrFormat(
        "NextRange replied with node tag \"%s\", which is not 1-%d "
        "characters of A-Z and 0-9",
        absl::CHexEscape(response.node_tag()), kMaxNodeTagSize));
  }
  if (absl::Status held = previous.held.Check(response.node_tag(),
                                              response.low(), response.high());
      !held.ok()) {
    return held;
  }
  return absl::OkStatus();
}

// Whether a NextRange refusal may be the node's answer to this client's own
// echo of its previous range (CONTRACT.md R17): the last_max guard rail
// (FAILED_PRECONDITION), or a last_* field it finds malformed
// (INVALID_ARGUMENT).
bool MayRefuseEcho(const absl::Status& status,
                   const hilo::v1::NextRangeRequest& request) {
  const bool echoes = request.last_max() != 0 || request.last_size() != 0 ||
                      request.has_last_range_at();
  return echoes && (status.code() == absl::StatusCode::kFailedPrecondition ||
                    status.code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace

hilo::v1::NextRangeRequest MakeNextRangeRequest(absl::string_view collection,
                                                const PreviousRange& previous) {
  hilo::v1::NextRangeRequest request;
  request.set_collection(std::string(collection));
  request.set_last_size(previous.size);
  request.set_last_max(previous.max);
  if (previous.range_at.has_value()) {
    ToProtoTime(*previous.range_at, request.mutable_last_range_at());
  }
  return request;
}

IssuedRange ToIssuedRange(const hilo::v1::NextRangeResponse& response,
                          size_t source) {
  return IssuedRange{response.low(),
                     response.high(),
                     response.node_tag(),
                     FromProtoTimeUnchecked(response.range_at()),
                     source,
                     response.range_token()};
}

GrpcRangeSource::GrpcRangeSource(std::vector<Target> targets,
                                 absl::Duration rpc_deadline,
                                 ReturnRetryPolicy return_retry,
                                 const MonotonicClock* clock)
    : rpc_deadline_(rpc_deadline),
      return_retry_(return_retry),
      no_batches_(std::make_unique<std::atomic<bool>[]>(targets.size())) {
  targets_.reserve(targets.size());
  bool any_channel = false;
  for (Target& target : targets) {
    any_channel = any_channel || target.channel != nullptr;
    plaintext_.push_back(target.plaintext);
    targets_.emplace_back(std::move(target.name), std::move(target.stub),
                          std::move(target.channel), clock);
  }
  if (any_channel) keeper_ = std::thread([this] { KeepConnected(); });
}

GrpcRangeSource::~GrpcRangeSource() {
  {
    base::MutexLock lock(&keeper_mu_);
    stopping_ = true;
  }
  if (keeper_.joinable()) keeper_.join();
}

void GrpcRangeSource::KeepConnected() {
  // Short slices, so the destructor never waits long.
  constexpr auto kSlice = std::chrono::milliseconds(100);
  while (true) {
    bool all_ready = true;
    for (const TargetStub& target : targets_) {
      grpc::Channel* channel = target.channel();
      if (channel == nullptr) continue;
      const grpc_connectivity_state state =
          channel->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY) continue;
      all_ready = false;
      // Waiting polls the channel, which is what moves its connection on.
      channel->WaitForStateChange(state,
                                  DeadlineIn(absl::FromChrono(kSlice / 2)));
    }
    base::MutexLock lock(&keeper_mu_);
    if (stopping_) return;
    if (all_ready) {
      keeper_mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                      keeper_mu_) { return stopping_; },
                                  absl::FromChrono(kSlice));
      if (stopping_) return;
    }
  }
}

std::string GrpcRangeSource::Describe() const {
  return absl::StrJoin(
      targets_, ", ",
      [](std::string* out, const TargetStub& t) { out->append(t.name()); });
}

namespace {

// Whether `status` is what a plaintext gRPC client gets from a server that
// speaks TLS: the server closes the connection at the first bytes, which
// gRPC 1.51 reports as "Socket closed".
bool LooksLikeTlsRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         absl::StrContains(status.message(), "Socket closed");
}

}  // namespace

absl::StatusOr<IssuedRange> GrpcRangeSource::Next(
    absl::string_view collection, const PreviousRange& previous) {
  // Sent as it is, a name that is not UTF-8 would fail on the wire (or,
  // in other languages' clients, be changed): refused here (R13).
  if (const size_t at = InvalidUtf8At(collection);
      at != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collection name \"%s\" is not valid UTF-8 (at byte %d); a "
        "collection is 1-256 bytes of UTF-8 without control characters",
        absl::CHexEscape(collection), at));
  }
  const hilo::v1::NextRangeRequest request =
      MakeNextRangeRequest(collection, previous);
  std::vector<std::string> failures;
  bool any_invalid = false;
  const size_t first = preferred_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < targets_.size(); ++i) {
    const size_t index = (first + i) % targets_.size();
    const TargetStub& target = targets_[index];
    absl::StatusOr<hilo::v1::NextRangeResponse> response =
        target.NextRange(request, rpc_deadline_);
    if (!response.ok() && MayRefuseEcho(response.status(), request)) {
      // Asked again without the echo: the node's range then starts above
      // its own Max. Its IDs carry its tag, so they cannot meet another
      // node's numbers, and a range overlapping what this client has from
      // this very node is still refused below (held).
      hilo::v1::NextRangeRequest bare;
      bare.set_collection(request.collection());
      response = target.NextRange(bare, rpc_deadline_);
    }
    if (response.ok()) {
      const absl::Status valid = CheckReply(*response, previous);
      if (valid.ok()) {
        preferred_.store(index, std::memory_order_relaxed);
        if (i > 0) failovers_.fetch_add(1, std::memory_order_relaxed);
        return ToIssuedRange(*response, index);
      }
      // A misbehaving server: its range is skipped, the next one is asked.
      any_invalid = true;
      failures.emplace_back(AttributedTo(target.name(), valid).message());
      continue;
    }
    if (!IsTransient(response.status())) {
      return AttributedTo(target.name(), response.status());
    }
    failures.push_back(absl::StrCat(
        target.name(), ": ", response.status().ToString(),
        plaintext_[index] && LooksLikeTlsRefusal(response.status())
            ? " (this client speaks plaintext: if the server speaks TLS, "
              "give the client TLS credentials, ClientOptions::credentials)"
            : ""));
  }
  if (any_invalid) {
    return absl::InternalError(
        absl::StrFormat("no hilo server gave a usable range of \"%s\": %s",
                        collection, absl::StrJoin(failures, "; ")));
  }
  return absl::UnavailableError(
      absl::StrFormat("no hilo server answered NextRange for \"%s\": %s",
                      collection, absl::StrJoin(failures, "; ")));
}

absl::StatusOr<ReturnResult> GrpcRangeSource::Return(
    absl::string_view collection, const IssuedRange& range, int64_t last) {
  const TargetStub& target = targets_[range.source % targets_.size()];
  hilo::v1::ReturnRangeRequest request;
  request.set_collection(std::string(collection));
  request.set_end(range.high);
  request.set_last(last);
  request.set_node_tag(range.node_tag);
  request.set_range_token(range.token);
  // Without a token a late copy could apply after the numbers were issued
  // again: such a return is sent once.
  const int attempts = range.token != 0 ? return_retry_.attempts : 1;
  return target.ReturnRange(request, attempts, return_retry_.backoff,
                            rpc_deadline_);
}

namespace {

// One node's share of a ReturnMany: indexes into its items, in order, and the
// request that carries them.
struct ReturnBatch {
  size_t target;
  std::vector<size_t> items;
  hilo::v1::ReturnRangesRequest request;
};

hilo::v1::ReturnRangeRequest ReturnProto(const ReturnRequest& item) {
  const IssuedRange& range = *item.range;
  hilo::v1::ReturnRangeRequest r;
  r.set_collection(std::string(item.collection));
  r.set_end(range.high);
  r.set_last(item.last);
  r.set_node_tag(range.node_tag);
  r.set_range_token(range.token);
  return r;
}

// The items grouped by the node that issued them (of `nodes`), in order, each
// batch within GrpcRangeSource's item and byte limits; a pair (with_next)
// stays in one batch when both ranges are the same node's.
std::vector<ReturnBatch> GroupByNode(absl::Span<const ReturnRequest> items,
                                     size_t nodes) {
  std::vector<ReturnBatch> batches;
  std::vector<size_t> open(nodes, SIZE_MAX);  // per node
  std::vector<size_t> bytes(nodes, 0);
  for (size_t i = 0; i < items.size();) {
    const size_t target = items[i].range->source % nodes;
    // The item, or the pair it starts (both to the same node: a pair of
    // two nodes' ranges is two single items).
    size_t count = 1;
    if (items[i].with_next && i + 1 < items.size() &&
        items[i + 1].range->source % nodes == target) {
      count = 2;
    }
    std::vector<hilo::v1::ReturnRangeRequest> protos;
    size_t size = 0;
    for (size_t k = 0; k < count; ++k) {
      protos.push_back(ReturnProto(items[i + k]));
      // The item, its field tag and its length.
      size += protos.back().ByteSizeLong() + 4;
    }
    if (open[target] == SIZE_MAX ||
        batches[open[target]].items.size() + count >
            GrpcRangeSource::kMaxReturnBatchItems ||
        bytes[target] + size > GrpcRangeSource::kMaxReturnBatchBytes) {
      open[target] = batches.size();
      bytes[target] = 0;
      batches.push_back(ReturnBatch{target, {}, {}});
    }
    ReturnBatch& batch = batches[open[target]];
    for (size_t k = 0; k < count; ++k) {
      batch.items.push_back(i + k);
      *batch.request.add_returns() = std::move(protos[k]);
    }
    bytes[target] += size;
    i += count;
  }
  return batches;
}

// The result of each of a batch's `returns` returns, read from the node's
// answer to the batch (or from the call's failure), attributed to `target`.
std::vector<absl::StatusOr<ReturnResult>> ReadBatchAnswer(
    const absl::StatusOr<hilo::v1::ReturnRangesResponse>& response, int returns,
    const std::string& target) {
  std::vector<absl::StatusOr<ReturnResult>> results;
  for (int k = 0; k < returns; ++k) {
    if (!response.ok()) {
      results.emplace_back(response.status());
    } else if (response->results_size() != returns) {
      results.emplace_back(absl::InternalError(
          absl::StrFormat("%s: ReturnRanges answered %d results for %d returns",
                          target, response->results_size(), returns)));
    } else if (const hilo::v1::ReturnRangeResult& r = response->results(k);
               r.code() != 0) {
      const absl::StatusCode code =
          r.code() > 0 && r.code() <= 16
              ? static_cast<absl::StatusCode>(r.code())
              : absl::StatusCode::kUnknown;
      results.emplace_back(
          AttributedTo(target, absl::Status(code, r.message())));
    } else {
      results.emplace_back(ReturnResult{r.applied(), r.max()});
    }
  }
  return results;
}

}  // namespace

std::vector<absl::StatusOr<ReturnResult>> GrpcRangeSource::ReturnMany(
    absl::Span<const ReturnRequest> items) {
  // Calls to one node at once, all nodes together.
  constexpr size_t kBatchThreads = 4;
  std::vector<absl::StatusOr<ReturnResult>> results(
      items.size(), absl::UnknownError("not sent"));
  const std::vector<ReturnBatch> batches = GroupByNode(items, targets_.size());
  ForEachInParallel(batches.size(), kBatchThreads, [&](size_t b) {
    const ReturnBatch& batch = batches[b];
    const TargetStub& target = targets_[batch.target];
    auto deliver = [&](std::vector<absl::StatusOr<ReturnResult>> outcomes) {
      for (size_t k = 0; k < batch.items.size(); ++k) {
        results[batch.items[k]] = std::move(outcomes[k]);
      }
    };
    // Sends the batch's items one by one, as to a server without batches.
    auto singly = [&] {
      std::vector<ReturnRequest> singles;
      for (size_t i : batch.items) singles.push_back(items[i]);
      deliver(RangeSource::ReturnMany(singles));
    };
    if (no_batches_[batch.target].load(std::memory_order_relaxed)) {
      return singly();
    }
    // Without a token a late copy could apply after the numbers were issued
    // again: a batch holding such a return is sent once.
    bool all_tokens = true;
    for (size_t i : batch.items) all_tokens &= items[i].range->token != 0;
    const absl::StatusOr<hilo::v1::ReturnRangesResponse> response =
        target.ReturnRanges(batch.request,
                            all_tokens ? return_retry_.attempts : 1,
                            return_retry_.backoff, rpc_deadline_);
    if (!response.ok() &&
        response.status().code() == absl::StatusCode::kUnimplemented) {
      no_batches_[batch.target].store(true, std::memory_order_relaxed);
      return singly();
    }
    deliver(
        ReadBatchAnswer(response, batch.request.returns_size(), target.name()));
  });
  return results;
}

}  // namespace hilo::internal
