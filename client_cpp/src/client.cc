#include "hilo/client.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/collection_name.h"
#include "client_cpp/src/document_id.h"
#include "client_cpp/src/fork_guard.h"
#include "client_cpp/src/fork_safe_source.h"
#include "client_cpp/src/grpc_range_source.h"
#include "client_cpp/src/prefetcher.h"
#include "client_cpp/src/range_cache.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "hilo/base/mutex.h"
#include "hilo/base/shared_mutex.h"

namespace hilo {
namespace {

// A document ID is read back from its end: the tag follows the last '-'
// (a tag has no '-'), the number is the digits before it (a number has no
// sign), and the separator is the character right before those digits. So
// any separator that is neither a digit nor '-' keeps two IDs of different
// (collection, number, tag) apart; these two do not.
absl::Status CheckSeparator(char separator) {
  const unsigned char byte = static_cast<unsigned char>(separator);
  if (byte < 0x20 || byte == 0x7f) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "separator 0x%02x is a control character; a document ID holds none "
        "(a NUL would cut it short in C strings and many stores); use a "
        "printable ASCII character but '|', a digit or '-'",
        byte));
  }
  if (byte >= 0x80) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "separator 0x%02x is not an ASCII character; one byte of a UTF-8 "
        "sequence would make every document ID invalid UTF-8. Use a "
        "printable ASCII character but '|', a digit or '-'",
        byte));
  }
  if (separator == '|') {
    return absl::InvalidArgumentError(
        "separator '|' is reserved; use any other character but a digit or "
        "'-'");
  }
  if (separator >= '0' && separator <= '9') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "separator '%c' is a digit; a digit can be read as part of the "
        "number, so two IDs could be equal (collection \"a\" number 1%c5 "
        "and collection \"a%c1\" number 5 would both be \"a%c1%c5-A\")",
        separator, separator, separator, separator, separator));
  }
  if (separator == '-') {
    return absl::InvalidArgumentError(
        "separator '-' is the character that ends the number; the number of "
        "an ID is the digits between the last separator and the last '-', "
        "which would then be the same character, so the number could not be "
        "read back");
  }
  return absl::OkStatus();
}

std::unique_ptr<internal::RangeSource> MakeGrpcSource(
    const std::vector<std::string>& names,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    bool plaintext, absl::Duration rpc_deadline) {
  std::vector<internal::GrpcRangeSource::Target> targets;
  for (const std::string& target : names) {
    grpc::ChannelArguments args;
    // An ID service sits under every insert: come back within a second of
    // a server's return rather than after gRPC's default of up to 2 minutes.
    // (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the
    // connect timeout, and at 100 ms connection attempts to a restarted
    // server were cut off before their handshake finished.)
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(target, credentials, args);
    targets.push_back(
        {target, hilo::v1::HiLo::NewStub(channel), channel, plaintext});
  }
  return std::make_unique<internal::GrpcRangeSource>(std::move(targets),
                                                     rpc_deadline);
}

uint64_t NextClientSerial() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// The collection a thread found last, and its client: CollectionFor. The
// name is copied here when it fits, so that a call compares it without
// reading the entry; the whole is one cache line.
struct LastFound {
  static constexpr size_t kNameBytes = 44;
  uint64_t client_serial = 0;
  void* entry = nullptr;
  uint32_t name_size = 0;
  char name[kNameBytes] = {};
};
static_assert(sizeof(LastFound) == 64);

// name[0, size) == b[0, size), eight bytes at a time: inline, with no call
// to memcmp, whose code a call after a pause of the machine would have to
// read back into the cache.
inline bool SameBytes(const char* a, const char* b, size_t size) {
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

// One collection of a Client: its range cache, and the prefix of its
// document IDs, prepared once for every call and every handle.
struct Client::CollectionEntry {
  CollectionEntry(absl::string_view name, char separator,
                  internal::RangeSource* source,
                  std::function<void(absl::string_view)> log,
                  double prefetch_at, Scheduler schedule)
      : cache(std::string(name), source, std::move(log), prefetch_at,
              std::move(schedule)),
        format(name, separator) {}

  internal::RangeCache cache;
  internal::DocumentIdFormat format;
};

struct Client::State {
  // ClientOptions::log (or the stderr default), called one line at a time:
  // collections are handed back on several threads at once.
  base::Mutex log_mu;
  std::function<void(absl::string_view)> log ABSL_GUARDED_BY(log_mu);

  // Read on every call (CollectionFor), written once per new collection.
  base::SharedMutex mu;
  // Entries are never removed while the client lives, so a pointer taken
  // from here stays valid.
  absl::flat_hash_map<std::string, std::unique_ptr<CollectionEntry>> collections
      ABSL_GUARDED_BY(mu);
  // Held for a whole ReturnUnusedRanges. Each call takes every cache's
  // ranges in map order and gives them back only at its end; two calls at
  // once could take two caches in opposite orders (the map may rehash in
  // between) and wait on each other for good.
  base::Mutex return_mu;

  // Fork (fork_guard.h, CONTRACT.md R16): a child drops every range it
  // inherited and hands none back; its source then refuses every call
  // (ForkSafeSource). Registered for the client's whole life.
  class ForkHook final : public internal::ForkAware {
   public:
    explicit ForkHook(Client* client) : client_(client) {
      internal::RegisterForFork(this);
    }
    ~ForkHook() override { internal::UnregisterForFork(this); }

    // The collections map, then each cache, then the prefetch queue: no
    // path takes them in another order.
    void BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS override {
      State& state = *client_->state_;
      state.mu.Lock();
      for (const auto& [name, entry] : state.collections) {
        entry->cache.LockForFork();
      }
      if (client_->prefetcher_ != nullptr) client_->prefetcher_->LockForFork();
    }

    void AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS override {
      State& state = *client_->state_;
      if (client_->prefetcher_ != nullptr) {
        client_->prefetcher_->UnlockAfterFork();
      }
      for (const auto& [name, entry] : state.collections) {
        entry->cache.UnlockAfterFork();
      }
      state.mu.Unlock();
    }

    void AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS override {
      State& state = *client_->state_;
      if (client_->prefetcher_ != nullptr) {
        client_->prefetcher_->AbandonAfterForkInChild();
      }
      for (const auto& [name, entry] : state.collections) {
        entry->cache.DropAfterForkInChild();
      }
      // Fresh and free, each: their waiters (and a holder of log_mu or
      // return_mu) were the parent's threads.
      new (&state.mu) base::SharedMutex();
      new (&state.log_mu) base::Mutex();
      new (&state.return_mu) base::Mutex();
    }

   private:
    Client* const client_;
  };
  std::unique_ptr<ForkHook> fork_hook;
};

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.targets.empty()) {
    return absl::InvalidArgumentError("no server targets given");
  }
  if (absl::Status s = CheckSeparator(options.separator); !s.ok()) return s;
  if (!(options.prefetch_at >= 0 && options.prefetch_at < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefetch_at is ", options.prefetch_at, "; use 0 (off) or (0, 1)"));
  }
  if (options.rpc_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rpc deadline is ", absl::FormatDuration(options.rpc_deadline),
        "; it must be positive"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials != nullptr ? options.credentials
                                     : grpc::InsecureChannelCredentials();
  for (const std::string& target : options.targets) {
    if (target.empty()) {
      return absl::InvalidArgumentError("a server target is empty");
    }
  }
  // Not used in a forked child: gRPC does not survive fork().
  auto source = std::make_unique<internal::ForkSafeSource>(MakeGrpcSource(
      options.targets, credentials,
      /*plaintext=*/options.credentials == nullptr, options.rpc_deadline));
  return std::unique_ptr<Client>(
      new Client(std::move(options), std::move(source)));
}

std::unique_ptr<Client> NewClientForTesting(
    ClientOptions options, std::unique_ptr<internal::RangeSource> source,
    std::function<void(std::function<void()>)> schedule) {
  return std::unique_ptr<Client>(
      new Client(std::move(options), std::move(source), std::move(schedule)));
}

size_t CollectionsForTesting(const Client& client) {
  base::ReaderMutexLock lock(&client.state_->mu);
  return client.state_->collections.size();
}

Client::Client(ClientOptions options,
               std::unique_ptr<internal::RangeSource> source,
               Scheduler schedule)
    : options_(std::move(options)),
      serial_(NextClientSerial()),
      source_(std::move(source)),
      state_(std::make_unique<State>()),
      schedule_(std::move(schedule)) {
  if (options_.prefetch_at > 0 && schedule_ == nullptr) {
    prefetcher_ = std::make_unique<internal::Prefetcher>();
    schedule_ = [prefetcher = prefetcher_.get()](std::function<void()> task) {
      prefetcher->Schedule(std::move(task));
    };
  }
  if (options_.prefetch_at == 0) schedule_ = nullptr;
  state_->fork_hook = std::make_unique<State::ForkHook>(this);
  base::MutexLock lock(&state_->log_mu);
  state_->log = options_.log;
  if (!state_->log) {
    state_->log = [](absl::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()),
                   line.data());
    };
  }
}

Client::~Client() {
  state_->fork_hook.reset();
  if (prefetcher_ != nullptr) prefetcher_->Stop();
  ReturnUnusedRanges();
}

ClientStats Client::stats() const {
  ClientStats stats;
  base::ReaderMutexLock lock(&state_->mu);
  for (const auto& [name, collection] : state_->collections) {
    collection->cache.AddStatsTo(&stats);
  }
  stats.failovers = source_->failovers();
  return stats;
}

// A thread that draws from one collection again finds it in `last_found`,
// without the shared lock (whose count is a cache line every drawing
// thread writes: 23 against 6 ns per NextId on one thread, 71 against 20 on
// two, before this) and without hashing the name; it reads the client's
// serial and that one line, no line of State or of the entry's name (a
// call that follows a pause of the machine finds few lines in the cache,
// and each it reads costs it tens of nanoseconds). An entry lives as long
// as its client, and a client's serial is never reused, so `entry` is read
// only while it is alive: this very client's.
namespace {
alignas(64) constinit thread_local LastFound last_found;
}  // namespace

ABSL_ATTRIBUTE_ALWAYS_INLINE inline Client::CollectionEntry*
Client::CollectionFor(absl::string_view collection) {
  const LastFound& last = last_found;
  if (last.client_serial == serial_ && last.name_size == collection.size()) {
    auto* entry = static_cast<CollectionEntry*>(last.entry);
    if (collection.size() <= LastFound::kNameBytes
            ? SameBytes(last.name, collection.data(), collection.size())
            : entry->cache.collection() == collection) {
      return entry;
    }
  }
  return LookUpCollection(collection);
}

Client::CollectionEntry* Client::LookUpCollection(
    absl::string_view collection) {
  CollectionEntry* found = nullptr;
  {
    base::ReaderMutexLock lock(&state_->mu);
    auto it = state_->collections.find(collection);
    if (it != state_->collections.end()) found = it->second.get();
  }
  if (found == nullptr) {
    // Judged before an entry is made: entries live as long as the client.
    if (!internal::CheckCollectionName(collection).ok()) return nullptr;
    found = &AddCollection(collection);
  }
  LastFound& last = last_found;
  last.client_serial = serial_;
  last.entry = found;
  // A name too long to copy keeps a size no short name has (saturated, never
  // truncated: a name of 2^32 + 5 bytes must not read as one of 5, whose
  // bytes `name` does not hold), so CollectionFor compares it with the
  // entry's own name. An empty view may point nowhere: nothing to copy.
  if (collection.size() <= LastFound::kNameBytes) {
    last.name_size = static_cast<uint32_t>(collection.size());
    if (!collection.empty()) {
      std::memcpy(last.name, collection.data(), collection.size());
    }
  } else {
    last.name_size =
        static_cast<uint32_t>(std::min<size_t>(collection.size(), UINT32_MAX));
  }
  return found;
}

Client::CollectionEntry& Client::AddCollection(absl::string_view collection) {
  base::WriterMutexLock lock(&state_->mu);
  std::unique_ptr<CollectionEntry>& entry = state_->collections[collection];
  if (entry == nullptr) {
    auto log = [state = state_.get()](absl::string_view line) {
      base::MutexLock lock(&state->log_mu);
      state->log(line);
    };
    entry = std::make_unique<CollectionEntry>(collection, options_.separator,
                                              source_.get(), std::move(log),
                                              options_.prefetch_at, schedule_);
  }
  return *entry;
}

namespace {

// What a call on a name CollectionFor refused returns: out of line, so that
// the calls' fast paths carry none of it.
template <typename T>
ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<T> Refused(
    absl::string_view collection) {
  return internal::CheckCollectionName(collection);
}

}  // namespace

absl::StatusOr<Id> Client::NextId(absl::string_view collection) {
  CollectionEntry* entry = CollectionFor(collection);
  if (ABSL_PREDICT_FALSE(entry == nullptr)) return Refused<Id>(collection);
  return entry->cache.Next();
}

absl::StatusOr<std::string> Client::NextDocumentId(
    absl::string_view collection) {
  CollectionEntry* entry = CollectionFor(collection);
  if (ABSL_PREDICT_FALSE(entry == nullptr)) {
    return Refused<std::string>(collection);
  }
  internal::RangeCache::Taken taken;
  if (absl::Status s = entry->cache.Take(&taken); !s.ok()) return s;
  return entry->format.Make(taken.number, taken.suffix);
}

CollectionHandle Client::Collection(absl::string_view collection) {
  CollectionEntry* entry = CollectionFor(collection);
  if (ABSL_PREDICT_FALSE(entry == nullptr)) {
    return CollectionHandle(internal::CheckCollectionName(collection),
                            std::string(collection));
  }
  return CollectionHandle(&entry->cache, &entry->format,
                          std::string(collection));
}

absl::StatusOr<Id> CollectionHandle::NextId() const {
  if (ABSL_PREDICT_FALSE(cache_ == nullptr)) return refusal_;
  return cache_->Next();
}

absl::StatusOr<std::string> CollectionHandle::NextDocumentId() const {
  if (ABSL_PREDICT_FALSE(cache_ == nullptr)) return refusal_;
  internal::RangeCache::Taken taken;
  if (absl::Status s = cache_->Take(&taken); !s.ok()) return s;
  return format_->Make(taken.number, taken.suffix);
}

absl::Status CollectionHandle::AppendDocumentId(std::string* out) const {
  if (ABSL_PREDICT_FALSE(cache_ == nullptr)) return refusal_;
  internal::RangeCache::Taken taken;
  if (absl::Status s = cache_->Take(&taken); !s.ok()) return s;
  format_->Append(taken.number, taken.suffix, out);
  return absl::OkStatus();
}

void Client::ReturnUnusedRanges() {
  base::MutexLock one_at_a_time(&state_->return_mu);
  std::vector<internal::RangeCache*> caches;
  {
    base::ReaderMutexLock lock(&state_->mu);
    for (const auto& [name, collection] : state_->collections) {
      caches.push_back(&collection->cache);
    }
  }
  // Every collection's ranges are retired first; then they all go back in
  // one ReturnMany (batches per node), a collection's pair of adjacent
  // ranges in one call, so that no other client's request comes between
  // the whole return of the range fetched ahead and the tail's.
  std::vector<internal::RangeCache::UnusedRanges> unused;
  unused.reserve(caches.size());
  for (internal::RangeCache* cache : caches) {
    unused.push_back(cache->TakeUnused());
  }
  std::vector<internal::ReturnRequest> requests;
  std::vector<size_t> first(caches.size());  // each cache's first request
  for (size_t c = 0; c < caches.size(); ++c) {
    first[c] = requests.size();
    caches[c]->AppendRequests(unused[c], &requests);
  }
  std::vector<absl::StatusOr<internal::ReturnResult>> results;
  if (!requests.empty()) results = source_->ReturnMany(requests);
  results.resize(requests.size(),
                 absl::InternalError("the range source gave no outcome"));
  for (size_t c = 0; c < caches.size(); ++c) {
    caches[c]->RecordReturns(unused[c],
                             absl::MakeConstSpan(results).subspan(
                                 first[c], unused[c].returns.size()));
  }
  for (size_t c = 0; c < caches.size(); ++c) caches[c]->EndReturn(unused[c]);
}

}  // namespace hilo
