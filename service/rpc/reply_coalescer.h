// ReplyCoalescer: the replies a connection gets from one committed batch
// leave together, when the batch's last completion has run.
//
// gRPC writes each finished call on its own: a batch of 25 NextRange calls
// from one client connection leaves the store's thread as up to 25
// sendmsg(2) calls, and on loopback each runs the receiving side's TCP
// stack on this thread too. That was about half of the extra server CPU a
// NextRange cost against an empty call (BENCHMARKS.md, History,
// 2026-12-06). So, inside a CompletionBatch (the group commit's completions
// of two or more operations), a caller's socket is held (TCP_CORK) from its
// second reply of the batch, or from its first unless each of the last
// `lone_batches` batches that replied to it gave it one reply only; the
// batch's end clears it, and the kernel sends what the held replies queued
// at once, in as few segments as fit. So a caller that has had one call in
// flight for its last `lone_batches` batches, the common case with many
// clients, is not held (holding costs three system calls, and one reply
// has nothing to wait for; each reply still costs a look-up), and a caller
// with many is held from its first even when a batch now and then gives it
// one. Outside a batch this does nothing at all.
//
// gRPC does not tell a call's socket, only its peer's address ("ipv4:
// 10.0.0.7:40312", "ipv6:[::1]:40312"), so the socket is found by that
// address among the sockets a listener of this process accepted, from a
// scan of the process's descriptors (/proc/self/fd); once per caller and
// batch, before corking, the descriptor is checked to still have that peer
// (getpeername). A caller whose socket is not known is not held, and the
// end of its batch asks this class's own thread to scan, so a scan of many
// descriptors holds up no commit; scans are rate-limited (at most one per
// `min_scan_interval`, and at most `max_scan_share` of the time). Best
// effort: a reply gRPC writes on a thread of its own after the batch ended
// leaves uncorked, and a descriptor closed and reused by another socket of
// the process between the check and the setsockopt holds that socket's
// writes until the batch ends, the rest of its completions.
//
// Thread-safe: every store thread that runs batches may use it at once.
#ifndef HILO_SERVICE_RPC_REPLY_COALESCER_H_
#define HILO_SERVICE_RPC_REPLY_COALESCER_H_

#include <cstdint>
#include <string>
#include <thread>

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
    // A caller is held from its first reply in a batch unless each of
    // its last this many batches gave it one reply (a new caller counts
    // as such). 0 or less: only ever from its second.
    int lone_batches = 8;
  };

  // `clock` (monotonic in the server) outlives this. Starts the thread
  // that scans; the destructor stops it, after a scan under way.
  ReplyCoalescer(Options options, const Clock* clock);
  ~ReplyCoalescer() override;
  ReplyCoalescer(const ReplyCoalescer&) = delete;
  ReplyCoalescer& operator=(const ReplyCoalescer&) = delete;

  // Called right before a reply to the caller at `peer` (gRPC's form) is
  // written, on the thread that writes it.
  void BeforeReply(absl::string_view peer) ABSL_LOCKS_EXCLUDED(mu_);

  void OnBatchEnd(const CompletionBatch& batch) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // What it did so far, for tests and the curious.
  struct Counts {
    int64_t corked = 0;     // sockets corked (and uncorked) for a batch
    int64_t scans = 0;      // scans of /proc/self/fd
    int64_t not_found = 0;  // callers of a batch whose socket was not known
    int64_t known = 0;      // callers' sockets the last scan found
  };
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits, at most `timeout`, until no scan is asked for or under way;
  // whether it got there. For tests, which read counts() after a scan.
  bool WaitForScansForTesting(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // A peer address in one form whichever way it was written: the family,
  // the address's bytes (an IPv4-mapped IPv6 address as IPv4) and the
  // port. Empty for anything but a TCP peer over IPv4 or IPv6.
  static std::string PeerKeyOf(absl::string_view grpc_peer);

 private:
  // A caller's socket a scan found.
  struct Socket {
    int fd = -1;
    // Batches in a row, up to options_.lone_batches, that gave it one
    // reply; a scan sets a socket new to it at the top.
    int lone_batches = 0;
  };
  // A caller a batch replied to.
  struct Caller {
    int replies = 0;
    int fd = -1;        // its socket, once looked up and known
    bool done = false;  // held, or not to be: nothing more to try
  };
  struct Pending {
    absl::flat_hash_map<std::string, Caller> callers;  // by peer key
    absl::InlinedVector<int, 4> corked;                // descriptors
    bool missed = false;  // a caller's socket was not known
  };

  enum class Scan { kIdle, kAsked, kRunning };

  // The scanner thread's body: a scan each time a batch's end asks.
  void ScanWhenAsked() ABSL_LOCKS_EXCLUDED(mu_);
  // The sockets this process's listeners accepted, by peer key, each
  // with `lone_batches` lone batches.
  static absl::flat_hash_map<std::string, Socket> ScanAcceptedSockets(
      int lone_batches);

  const Options options_;
  const Clock* const clock_;
  mutable base::Mutex mu_;
  absl::flat_hash_map<const CompletionBatch*, Pending> pending_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Socket> sockets_ ABSL_GUARDED_BY(mu_);
  absl::Time next_scan_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Scan scan_ ABSL_GUARDED_BY(mu_) = Scan::kIdle;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::thread scanner_;  // last: it uses the members above
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_REPLY_COALESCER_H_
