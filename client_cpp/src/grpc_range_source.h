// GrpcRangeSource: a RangeSource over one or more hilo servers, each
// reached through its TargetStub (target_stub.h); this class chooses among
// them.
//
// Next tries the preferred target first and, on UNAVAILABLE or
// DEADLINE_EXCEEDED, each other target once; the target that answers becomes
// the preferred one. A reply that breaks the contract (CONTRACT.md R11: a
// range outside [1, INT64_MAX] or of more than kMaxRangeSize numbers, a
// range_at that is not a valid Timestamp, a node tag that is not 1-4
// characters of A-Z and 0-9, a range overlapping what the client holds or
// handed out from that node, PreviousRange::held) counts as that target
// failing and is never used nor echoed: the next target is tried, and if
// none gives a usable range the error is INTERNAL (not UNAVAILABLE: a
// misbehaving server does not get better by retrying), naming every target and
// what it did. A target that answers FAILED_PRECONDITION or INVALID_ARGUMENT to
// a request that reports a previous range is asked once more, at once, without
// it (CONTRACT.md R17: a node far behind the one that issued that range).
//
// Return goes to the target that issued the range, with the range's token,
// and is retried there as TargetStub::ReturnRange says, within one
// rpc_deadline. A return without a token (a range from a server older than
// tokens) could apply twice and is sent once.
//
// The sync API drives a channel's connection attempts only while a call
// waits on it, and calls to a channel in backoff fail at once without
// waiting; so after a server restart, callers that keep retrying could wait
// for gRPC's 5 s backup poller. A keeper thread therefore watches every
// channel that is not READY, which drives its reconnection.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_
#define HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client_cpp/src/monotonic_clock.h"
#include "client_cpp/src/range_source.h"
#include "client_cpp/src/target_stub.h"
#include "grpcpp/channel.h"
#include "hilo/base/mutex.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo::internal {

// The NextRange request for `collection` after `previous`, and the range a
// reply describes (issued by target `source`): the one mapping between the
// wire and a range source, which tests' in-process sources share.
hilo::v1::NextRangeRequest MakeNextRangeRequest(absl::string_view collection,
                                                const PreviousRange& previous);
IssuedRange ToIssuedRange(const hilo::v1::NextRangeResponse& response,
                          size_t source);

class GrpcRangeSource final : public RangeSource {
 public:
  struct Target {
    std::string name;
    std::unique_ptr<hilo::v1::HiLo::StubInterface> stub;
    // The stub's channel, kept connected; null (for mock stubs) means none.
    std::shared_ptr<grpc::Channel> channel;
    // Whether the channel speaks plaintext: a failure that looks like a TLS
    // server closing the connection then says that TLS may be needed.
    bool plaintext = false;
  };

  // `targets` must not be empty. `clock` measures every deadline (see
  // TargetStub); it must outlive the source.
  GrpcRangeSource(std::vector<Target> targets, absl::Duration rpc_deadline,
                  ReturnRetryPolicy return_retry = {},
                  const MonotonicClock* clock = &MonotonicClock::Real());
  // Stops the keeper thread (within about 100 ms).
  ~GrpcRangeSource() override;

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override;
  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override;
  // Sends each node's items as ReturnRanges calls of at most
  // kMaxReturnBatchItems items and kMaxReturnBatchBytes bytes, several at
  // once, each retried as Return is; a pair (ReturnRequest::with_next) is
  // never split across two calls. To a node that answers UNIMPLEMENTED
  // (older than ReturnRanges), from then on single Return calls instead,
  // in the order given.
  std::vector<absl::StatusOr<ReturnResult>> ReturnMany(
      absl::Span<const ReturnRequest> items) override;
  std::string Describe() const override;

  // The server's limits for one ReturnRanges call are 1000 items and a
  // 64 KiB request; these stay under them.
  static constexpr size_t kMaxReturnBatchItems = 1000;
  static constexpr size_t kMaxReturnBatchBytes = 60 * 1024;
  int64_t failovers() const override {
    return failovers_.load(std::memory_order_relaxed);
  }

 private:
  // Body of the keeper thread: until stopped, waits on each channel that
  // is not READY, asking it to connect.
  void KeepConnected();

  std::vector<TargetStub> targets_;
  std::vector<bool> plaintext_;  // Target::plaintext, by index
  const absl::Duration rpc_deadline_;
  const ReturnRetryPolicy return_retry_;
  std::atomic<size_t> preferred_{0};
  std::atomic<int64_t> failovers_{0};
  // Per target: it answered ReturnRanges with UNIMPLEMENTED.
  std::unique_ptr<std::atomic<bool>[]> no_batches_;

  base::Mutex keeper_mu_;
  bool stopping_ ABSL_GUARDED_BY(keeper_mu_) = false;
  std::thread keeper_;
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_
