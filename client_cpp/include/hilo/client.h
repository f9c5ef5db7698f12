// hilo::Client: document IDs from a hilo service, without a round trip per ID.
//
// The client keeps one range of numbers per collection, obtained from a hilo
// server with NextRange, and hands its numbers out locally. Each number keeps
// the tag of the node that issued its range, so IDs stay unique across nodes:
//
//   hilo::ClientOptions options;
//   options.targets = {"hilo-0.hilo:50051", "hilo-1.hilo:50051"};
//   absl::StatusOr<std::unique_ptr<hilo::Client>> client =
//       hilo::Client::Create(options);
//   if (!client.ok()) return client.status();
//   absl::StatusOr<std::string> id = (*client)->NextDocumentId("orders");
//   // *id == "orders/1-A"
//
// A Client is safe for concurrent use by many threads without external
// synchronization. NextId finds the collection's cache by name (a thread that
// asks for the collection it asked for last skips the look-up); a
// CollectionHandle (Client::Collection) finds it once, after which each
// NextId is one atomic increment and takes no lock while the range lasts. When
// a fifth of a range is used, the next one is fetched in the background, so
// callers rarely wait; if a range does run dry first, exactly one caller asks a
// server for the next one and the others of that collection wait for it. Ranges
// grow while a collection is busy (the client reports its previous range with
// each request) and never move down. When the client stops, it hands the
// numbers it did not use back, so the next client continues right after the
// last number this one handed out.
#ifndef HILO_CLIENT_H_
#define HILO_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"

namespace hilo {

namespace internal {
class DocumentIdFormat;
class IdSuffix;
class Prefetcher;
class RangeCache;
class RangeSource;
}  // namespace internal

struct ClientOptions {
  // Server addresses in gRPC target syntax ("host:port", "dns:///name:port").
  // At least one. On UNAVAILABLE or DEADLINE_EXCEEDED the client tries the
  // next, and stays with the one that answered. A reply that breaks the
  // contract (a range below 1, a node tag that is not 1-4 characters of A-Z
  // and 0-9) is never used: that target is skipped the same way.
  std::vector<std::string> targets;

  // Between collection and number in a document ID. Any character but '|'
  // (reserved), a digit or '-': an ID is read from its end (the tag after
  // the last '-', the number in the digits before it), and a digit or '-'
  // here would let two IDs be equal or the number not be read back.
  char separator = '/';

  // Deadline of each NextRange attempt (each target is one attempt), and of
  // each return with all its retries. Measured on a monotonic clock: a step
  // of the wall clock neither stretches nor cuts it.
  absl::Duration rpc_deadline = absl::Seconds(5);

  // Share of a range used before the next one is fetched in the
  // background, so callers switch ranges without waiting on the network.
  // 0 turns prefetching off; otherwise in (0, 1).
  double prefetch_at = 0.2;

  // Channel credentials for every target; null means plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;

  // Where best-effort failures (a ReturnRange that still failed after its
  // retries) are reported; null means one line on stderr. A refused return
  // is normal and not reported. Called with one line at a time, never from
  // two threads at once.
  std::function<void(absl::string_view)> log;
};

// Counters of a client's behaviour since it was created, for an
// application's own dashboard: each only grows, like a Prometheus counter
// (the README shows how to export them). Counting costs nothing on NextId's
// fast path: the counters move only where a range is fetched or returned.
struct ClientStats {
  // NextId calls that waited for a range to arrive from a server (or for
  // the error of that attempt), rather than taking a cached number.
  int64_t calls_waited = 0;

  // Ranges a server issued to this client, however they were asked for.
  int64_t ranges_fetched = 0;
  // Of ranges_fetched, those fetched ahead of need (ClientOptions::
  // prefetch_at), so that no caller waited for them.
  int64_t ranges_prefetched = 0;

  // NextRange calls that another target answered because the preferred one
  // failed (UNAVAILABLE, DEADLINE_EXCEEDED, or a reply that breaks the
  // contract); that target is preferred from then on.
  int64_t failovers = 0;

  // Unused numbers handed back (ReturnUnusedRanges, the destructor), one
  // count per range: applied, the node took them back; refused, the node
  // had issued a newer range meanwhile (normal; the numbers stay unused);
  // failed, no answer after the retries, or an error (logged).
  int64_t returns_applied = 0;
  int64_t returns_refused = 0;
  int64_t returns_failed = 0;

  // Range fetches (prefetches included) and returns that failed, by the
  // status code the client got after failover and retries; codes that
  // never occurred are absent. A fetch is counted once however many
  // callers waited for it.
  std::map<absl::StatusCode, int64_t> errors;

  // Not a counter: per collection, how long the numbers the client holds
  // (the rest of its current range and a range fetched ahead) last at the
  // rate it handed them out since its previous range began (CONTRACT.md
  // R14). The server sizes ranges so that a collection in steady use still
  // holds its --range_runway (30 s) when it asks for the next range; a
  // store failover shorter than the runway then makes no call wait.
  // Collections holding no numbers, or that handed none out yet, are
  // absent.
  std::map<std::string, absl::Duration> runway;
};

// The tag of the node that issued a range: 1-4 characters of A-Z and 0-9
// (the client never hands out a number whose range came with any other).
// A small value held in place, never on the heap, so Ids are copied without
// allocating:
//
//   hilo::NodeTag tag = id->node_tag;
//   if (tag == "A") ...;
//   absl::string_view text = tag.view();  // valid while `tag` lives
//   std::string owned(tag);
class NodeTag {
 public:
  static constexpr size_t kMaxSize = 4;

  // The empty tag (what a default-constructed Id holds).
  constexpr NodeTag() = default;
  // The first kMaxSize characters of `tag`.
  constexpr explicit NodeTag(absl::string_view tag)
      : size_(static_cast<uint8_t>(tag.size() < kMaxSize ? tag.size()
                                                         : kMaxSize)) {
    for (size_t i = 0; i < size_; ++i) chars_[i] = tag[i];
  }

  // The characters, valid as long as this NodeTag.
  constexpr absl::string_view view() const {
    return absl::string_view(chars_, size_);
  }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  explicit operator std::string() const { return std::string(view()); }

  friend constexpr bool operator==(const NodeTag& a, const NodeTag& b) {
    return a.view() == b.view();
  }
  friend constexpr bool operator==(const NodeTag& a, absl::string_view b) {
    return a.view() == b;
  }
  friend constexpr bool operator<(const NodeTag& a, const NodeTag& b) {
    return a.view() < b.view();
  }
  friend std::ostream& operator<<(std::ostream& os, const NodeTag& tag) {
    return os << tag.view();
  }
  template <typename H>
  friend H AbslHashValue(H h, const NodeTag& tag) {
    return H::combine(std::move(h), tag.view());
  }

 private:
  friend class internal::IdSuffix;
  // The packed form of a range's suffix (internal::IdSuffix): the
  // characters as one NUL-padded word. One store, where the string_view
  // constructor copies byte by byte.
  static NodeTag FromPacked(uint32_t chars, size_t size) {
    static_assert(sizeof(chars) == kMaxSize);
    NodeTag tag;
    std::memcpy(tag.chars_, &chars, sizeof(chars));
    tag.size_ = static_cast<uint8_t>(size);
    return tag;
  }

  char chars_[kMaxSize] = {};
  uint8_t size_ = 0;
};
static_assert(std::is_trivially_copyable_v<NodeTag>);

// One number and the tag of the node whose range it came from.
struct Id {
  int64_t number = 0;
  NodeTag node_tag;
};
static_assert(std::is_trivially_copyable_v<Id>);

class Client;

// One collection of a Client, for callers that draw many IDs from it: the
// name is looked up once, when the handle is made, so NextId is the range
// cache's atomic increment alone. It draws from the same range as
// Client::NextId on that collection. Cheap to copy, safe to share between
// threads; must not outlive its Client.
//
//   hilo::CollectionHandle orders = client->Collection("orders");
//   absl::StatusOr<std::string> id = orders.NextDocumentId();  // "orders/1-A"
class CollectionHandle {
 public:
  // As Client::NextId and Client::NextDocumentId on this collection.
  absl::StatusOr<Id> NextId() const;
  absl::StatusOr<std::string> NextDocumentId() const;

  // Appends the next document ID (as NextDocumentId makes it) to *out, for
  // hot loops: a buffer cleared and reused from call to call is never
  // reallocated once its capacity holds an ID, so no call allocates. The
  // ID is put together from pieces prepared ahead (the collection and
  // separator once per collection, "-" and the tag once per range) and
  // written straight into *out, which grows once.
  //
  //   std::string id;
  //   for (...) {
  //     id.clear();
  //     if (absl::Status s = orders.AppendDocumentId(&id); !s.ok()) ...;
  //     Insert(id);  // "orders/12-A"
  //   }
  //
  // Errors as Client::NextId; on error *out is left as it was.
  absl::Status AppendDocumentId(std::string* out) const;

  const std::string& name() const { return name_; }

 private:
  friend class Client;
  CollectionHandle(internal::RangeCache* cache,
                   const internal::DocumentIdFormat* format, std::string name)
      : cache_(cache), format_(format), name_(std::move(name)) {}
  // A handle on a name no node takes: every call fails with `refusal`.
  CollectionHandle(absl::Status refusal, std::string name)
      : refusal_(std::move(refusal)), name_(std::move(name)) {}

  // Both the Client's, shared by every handle on the collection; null for
  // a name refused.
  internal::RangeCache* cache_ = nullptr;
  const internal::DocumentIdFormat* format_ = nullptr;
  absl::Status refusal_;
  std::string name_;
};

class Client {
 public:
  // Checks the options and creates a channel per target. Connecting is lazy,
  // so this succeeds with no server running. INVALID_ARGUMENT for bad
  // options, naming the option and the rule (e.g. a digit as separator).
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);

  // Hands the unused tail of every range back (ReturnUnusedRanges).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The next number of `collection` and its node tag. Errors:
  // INVALID_ARGUMENT for a bad collection name (judged by the client, which
  // keeps nothing for it: empty, over 256 bytes, not UTF-8, or with a
  // control character; CONTRACT.md R19);
  // UNAVAILABLE, naming every target, when no server answered within its
  // deadline; INTERNAL, naming every target, when a server replied with a
  // range that breaks the contract (e.g. a malformed node tag) and no other
  // target gave a usable one; otherwise the server's status.
  //
  // Each name the client takes gets an entry (its ranges, its counters)
  // that lives as long as the client, even if every node refuses it
  // (RESOURCE_EXHAUSTED past a node's --max_collections, say): a caller
  // that takes collection names from its own callers bounds how many.
  absl::StatusOr<Id> NextId(absl::string_view collection);

  // "collection<separator>number-tag", e.g. "orders/10-A". Errors as NextId.
  absl::StatusOr<std::string> NextDocumentId(absl::string_view collection);

  // A handle on `collection` (see CollectionHandle). Never fails; a bad
  // name is reported by each call on the handle, as by NextId.
  CollectionHandle Collection(absl::string_view collection);

  // Hands the unused numbers of each collection back to the node that
  // issued them, so the next client continues right after the last number
  // this one handed out: a range fetched ahead goes back whole, then the
  // unused tail of the current range, each with the token the node gave
  // with it. A node applies each return at most once and only while nobody
  // took a range since (otherwise it refuses it, which is normal), so a
  // return that failed with UNAVAILABLE or DEADLINE_EXCEEDED is sent again
  // to the same node, a few times within rpc_deadline. Best effort:
  // failures are logged, never returned. The client stays usable; the next
  // NextId fetches a new range. Every collection goes back at once, in
  // ReturnRanges calls of up to 1000 ranges per node (a few calls at a
  // time, on threads that live only for this call); a collection's range
  // fetched ahead and the tail of its current range, when they are
  // adjacent ranges of one node, go in the same call, the later range
  // first, so that no other client's NextRange can come between them and
  // make the tail's return refused. To a node older than ReturnRanges, one
  // ReturnRange per range in that order, up to 64 collections at a time.
  // NextId calls on these collections wait until the call ends.
  void ReturnUnusedRanges();

  // The counters so far, summed over every collection, and each
  // collection's runway. Cheap enough to call on each scrape (one shared
  // lock, and per collection a few loads and its lock, taken briefly).
  ClientStats stats() const;

 private:
  using Scheduler = std::function<void(std::function<void()>)>;
  friend std::unique_ptr<Client> NewClientForTesting(
      ClientOptions options, std::unique_ptr<internal::RangeSource> source,
      Scheduler schedule);
  friend size_t CollectionsForTesting(const Client& client);

  Client(ClientOptions options, std::unique_ptr<internal::RangeSource> source,
         Scheduler schedule = nullptr);
  struct CollectionEntry;
  // The entry of `collection`, made if new: the one this thread found last
  // if it is that, else LookUpCollection.
  // Null, and nothing kept, for a name no node takes (CONTRACT.md R19).
  CollectionEntry* CollectionFor(absl::string_view collection);
  CollectionEntry* LookUpCollection(absl::string_view collection);
  CollectionEntry& AddCollection(absl::string_view collection);

  struct State;
  const ClientOptions options_;
  // This client among every Client of the process, never reused: the key
  // of each thread's last collection (CollectionFor), which must not match
  // a later client made at the same address. Here, not in State, so that
  // a call on the collection found last reads no line of State.
  const uint64_t serial_;
  std::unique_ptr<internal::RangeSource> source_;
  std::unique_ptr<State> state_;
  // Null when prefetching is off. Stopped before the caches go away.
  std::unique_ptr<internal::Prefetcher> prefetcher_;
  // Runs prefetch tasks later, on another thread; null when off.
  Scheduler schedule_;
};

}  // namespace hilo

#endif  // HILO_CLIENT_H_
