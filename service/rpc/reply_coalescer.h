// ReplyCoalescer: the replies a connection gets from one committed batch
// leave together, in one TCP segment instead of one each.
//
// gRPC writes each finished call on its own: a batch of 25 NextRange calls
// from one client connection leaves the store's thread as up to 25
// sendmsg(2) calls, and on loopback each runs the receiving side's TCP
// stack on this thread too. That was most of the extra server CPU a
// NextRange cost against an empty call (BENCHMARKS.md, History,
// 2026-12-06). So, inside a CompletionBatch (the group commit's completions
// of two or more operations), the second reply to the same peer sets
// TCP_CORK on that peer's socket; the batch's end clears it, and the
// kernel sends what the replies queued at once. The first reply to a peer
// leaves at once, and a peer with one reply in the batch costs nothing
// more than a lookup; outside a batch this does nothing at all.
//
// gRPC does not tell a call's socket, only its peer's address ("ipv4:
// 10.0.0.7:40312", "ipv6:[::1]:40312"), so the socket is found by that
// address: a scan of this process's descriptors (/proc/self/fd) finds each
// connected TCP socket's peer, and each use checks the descriptor still
// has it (getpeername) before corking. Scans are rate-limited (at most one
// per `min_scan_interval`, and at most `max_scan_share` of the time), so a
// flood of new connections costs a bounded share of the store's thread; a
// reply whose socket is not known yet simply leaves uncorked. A socket
// corked by mistake (its descriptor reused between the check and the
// setsockopt) is only held until the batch ends, microseconds later.
//
// Thread-safe: every store thread that runs batches may use it at once.
#ifndef HILO_SERVICE_RPC_REPLY_COALESCER_H_
#define HILO_SERVICE_RPC_REPLY_COALESCER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/store/completion_batch.h"

namespace hilo {

class ReplyCoalescer final : public CompletionBatch::Listener {
 public:
  struct Options {
    absl::Duration min_scan_interval = absl::Milliseconds(100);
    // A scan that took d waits d * (1 - share) / share before the next.
    double max_scan_share = 0.01;
  };

  // `clock` (monotonic in the server) outlives this.
  ReplyCoalescer(Options options, const Clock* clock);

  // Called right before a reply to the caller at `peer` (gRPC's form) is
  // written, on the thread that writes it.
  void BeforeReply(absl::string_view peer);

  void OnBatchEnd(const CompletionBatch& batch) override;

  // What it did so far, for tests and the curious.
  struct Counts {
    int64_t corked = 0;     // sockets corked (and uncorked) for a batch
    int64_t scans = 0;      // scans of /proc/self/fd
    int64_t not_found = 0;  // second replies whose socket was not found
  };
  Counts counts() const;

  // A peer address in one form whichever way it was written: the family,
  // the address's bytes (an IPv4-mapped IPv6 address as IPv4) and the
  // port. Empty for anything but a TCP peer over IPv4 or IPv6.
  static std::string PeerKeyOf(absl::string_view grpc_peer);

 private:
  struct Pending {
    absl::flat_hash_map<std::string, int> replies;  // by peer key
    absl::InlinedVector<int, 4> corked;             // descriptors
  };

  // The descriptor whose peer is `key`, checked now; -1 if none.
  int FindSocket(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Scan() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const Clock* const clock_;
  mutable base::Mutex mu_;
  absl::flat_hash_map<const CompletionBatch*, Pending> pending_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> sockets_ ABSL_GUARDED_BY(mu_);
  absl::Time next_scan_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_REPLY_COALESCER_H_
