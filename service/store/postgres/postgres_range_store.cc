#include "service/store/postgres/postgres_range_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hilo/base/await.h"
#include "service/store/postgres/postgres_batch_runner.h"
#include "service/store/postgres/postgres_collection_count.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_history.h"
#include "service/store/postgres/postgres_node_tag.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/postgres/postgres_schema.h"
#include "service/store/validation.h"

namespace hilo {
namespace {

using internal::PostgresBatchRunner;
using internal::PostgresConnection;
using internal::Result;
using internal::Statement;
using internal::Trimmed;

// A statement takes at most 65,535 parameters: 8 per row written.
constexpr int kMaxBatch = 4096;

// What a batch runner is told of the store's options: its limits, the
// reports it makes and its test hooks.
PostgresBatchRunner::Options RunnerOptions(
    const PostgresRangeStoreOptions& store) {
  PostgresBatchRunner::Options runner;
  runner.max_attempts = store.max_attempts;
  runner.lock_timeout = store.lock_timeout;
  runner.reserve_ranges = store.reserve_ranges;
  runner.standby_wait = store.standby_wait;
  runner.max_remembered_collections = store.max_remembered_collections;
  runner.standby_left_grace = store.standby_left_grace;
  runner.windows_clock = store.windows_clock;
  runner.max_collections = store.max_collections;
  runner.on_commit = store.on_commit;
  runner.on_database_error = store.on_database_error;
  runner.before_read_batch_for_testing = store.before_read_batch_for_testing;
  runner.after_commit_sent_for_testing = store.after_commit_sent_for_testing;
  runner.before_count_stored_for_testing =
      store.before_count_stored_for_testing;
  return runner;
}

}  // namespace

absl::StatusOr<std::string> DescribePostgresConnection(absl::string_view uri) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(uri).c_str(), &error);
  if (options == nullptr) {
    std::string message = Trimmed(error);
    PQfreemem(error);
    return absl::InvalidArgumentError(absl::StrCat(
        "PostgreSQL connection string cannot be parsed: ", message));
  }
  std::map<std::string, std::string> values;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  auto get = [&](const char* key, const char* fallback) {
    auto it = values.find(key);
    return it != values.end() && !it->second.empty() ? it->second
                                                     : std::string(fallback);
  };
  const std::string user = get("user", "");
  // A multi-host string lists hosts and ports apart ("h1,h2" and "p1,p2",
  // or one port for all): each host is named with its own port.
  const std::vector<std::string> hosts =
      absl::StrSplit(get("host", get("hostaddr", "localhost").c_str()), ',');
  const std::vector<std::string> ports =
      absl::StrSplit(get("port", "5432"), ',');
  std::vector<std::string> addresses;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string& port =
        ports.size() == hosts.size() ? ports[i] : ports.front();
    addresses.push_back(absl::StrCat(hosts[i].empty() ? "localhost" : hosts[i],
                                     ":", port.empty() ? "5432" : port));
  }
  return absl::StrCat("postgresql://", user.empty() ? "" : user + "@",
                      absl::StrJoin(addresses, ","), "/",
                      get("dbname", user.c_str()));
}

absl::StatusOr<std::unique_ptr<PostgresRangeStore>> PostgresRangeStore::Open(
    PostgresRangeStoreOptions options) {
  if (options.uri.empty()) {
    return absl::InvalidArgumentError("PostgreSQL connection string is empty");
  }
  // A statement takes at most 65,535 parameters: 8 per row written.
  if (options.max_batch < 1 || options.max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max batch is %d; on PostgreSQL it must be 1 to %d",
                        options.max_batch, kMaxBatch));
  }
  if (options.reserve_ranges < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "reserve_ranges is %d; it must be at least 1", options.reserve_ranges));
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max attempts is %d; it must be at least 1", options.max_attempts));
  }
  if (const std::optional<NodeTagLease>& lease = options.node_tag_lease) {
    if (lease->candidates.empty() || lease->holder.empty()) {
      return absl::InvalidArgumentError(
          "a node tag lease needs at least one tag and a holder");
    }
    for (const std::string& tag : lease->candidates) {
      if (absl::Status s = ValidateNodeTag(tag); !s.ok()) return s;
    }
    if (lease->duration <= options.probe_interval) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a node tag lease of %s would run out between two renewals (the "
          "probe runs every %s)",
          absl::FormatDuration(lease->duration),
          absl::FormatDuration(options.probe_interval)));
    }
  }
  absl::StatusOr<std::string> description =
      DescribePostgresConnection(options.uri);
  if (!description.ok()) return description.status();
  std::unique_ptr<PostgresRangeStore> store(
      new PostgresRangeStore(std::move(options), *std::move(description)));
  absl::StatusOr<std::unique_ptr<PostgresConnection>> connection =
      store->Connect();
  if (!connection.ok()) return connection.status();
  PostgresConnection& c = **connection;

  // Servers starting together take turns: the first creates the schema,
  // the others find it.
  if (absl::Status s =
          internal::CreateOrCheckPostgresSchema(c, store->description_);
      !s.ok()) {
    return s;
  }
  // Before anything is handed out on this database.
  if (absl::Status s = store->CheckHistoryOn(c); !s.ok()) return s;
  if (absl::Status s = internal::CheckStandbysVisible(c, store->description_);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Result> count =
      c.Query("SELECT count(*) FROM hilo_collections", "counting collections");
  if (!count.ok()) return count.status();
  int64_t rows = 0;
  if (absl::SimpleAtoi(PQgetvalue(count->get(), 0, 0), &rows)) {
    store->count_->Set(rows);
  }
  if (store->options_.node_tag_lease.has_value()) {
    absl::StatusOr<std::string> tag = internal::ClaimNodeTag(
        c, *store->options_.node_tag_lease, store->description_);
    if (!tag.ok()) return tag.status();
    store->node_tag_ = *std::move(tag);
  }
  if (absl::Status s = store->writer_->Adopt(*std::move(connection)); !s.ok()) {
    return s;
  }

  PostgresRangeStore* raw = store.get();
  const GroupCommit::Options queue_options{
      .max_batch = raw->options_.max_batch,
  };
  store->queue_ = std::make_unique<GroupCommit>(
      queue_options, [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->writer_->Run(batch);
      });
  // The reading connection opens with the first read batch.
  store->read_queue_ = std::make_unique<GroupCommit>(
      queue_options, [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->reader_->Run(batch);
      });
  store->prober_ = std::thread([raw] { raw->ProbeLoop(); });
  return store;
}

PostgresRangeStore::PostgresRangeStore(PostgresRangeStoreOptions options,
                                       std::string description)
    : options_(std::move(options)),
      description_(std::move(description)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      count_(std::make_unique<internal::PostgresCollectionCount>()),
      writer_(MakeRunner(/*writes=*/true)),
      reader_(MakeRunner(/*writes=*/false)) {}

std::unique_ptr<PostgresBatchRunner> PostgresRangeStore::MakeRunner(
    bool writes) {
  PostgresBatchRunner::Hooks hooks;
  hooks.connect =
      [this, writes]() -> absl::StatusOr<std::unique_ptr<PostgresConnection>> {
    absl::StatusOr<std::unique_ptr<PostgresConnection>> c = Connect();
    // A new write connection may have reached another database (a
    // promoted standby, a restore): nothing is written on it before its
    // schema (perhaps from before a migration this server ran: the table
    // would lack columns every batch reads) and its history are checked,
    // as at Open. The read connection's batches read what this migrates.
    if (c.ok() && writes) {
      if (absl::Status s =
              internal::CreateOrCheckPostgresSchema(**c, description_);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckHistoryOn(**c); !s.ok()) return s;
    }
    return c;
  };
  // Only the write connection's state counts; see reachable().
  if (writes) hooks.reachable = [this](bool up) { SetReachable(up); };
  hooks.park = [this](std::unique_ptr<Request> request, bool postponed) {
    Park(std::move(request), postponed);
  };
  if (writes) {
    hooks.renewal = [this]() -> std::optional<Statement> {
      if (node_tag_.empty() || node_tag_lost_) return std::nullopt;
      return internal::RenewNodeTag(node_tag_, *options_.node_tag_lease);
    };
    hooks.renewed = [this](PostgresConnection& c, const PGresult* result) {
      if (std::optional<std::string> holder = internal::NodeTagTakenBy(
              c, result, node_tag_, *options_.node_tag_lease)) {
        NodeTagLost(*holder);
      }
    };
  }
  hooks.count = count_.get();
  PostgresBatchRunner::Options runner = RunnerOptions(options_);
  runner.description = description_;
  runner.clock = clock_;
  runner.reserves = writes;
  return std::make_unique<PostgresBatchRunner>(std::move(runner),
                                               std::move(hooks));
}

void PostgresRangeStore::SetReachable(bool reachable) {
  if (reachable_.exchange(reachable) != reachable && options_.on_reachability) {
    options_.on_reachability(reachable);
  }
}

int64_t PostgresRangeStore::collection_count() const { return count_->Load(); }

PostgresRangeStore::Counters PostgresRangeStore::counters() const {
  Counters sum;
  for (const auto* runner : {writer_.get(), reader_.get()}) {
    const PostgresBatchRunner::Counters c = runner->counters();
    sum.set_aside += c.set_aside;
    sum.creations_set_aside += c.creations_set_aside;
    sum.locked_failures += c.locked_failures;
    sum.conflict_retries += c.conflict_retries;
    sum.standby_waits += c.standby_waits;
  }
  return sum;
}

PostgresRangeStore::~PostgresRangeStore() {
  {
    base::MutexLock lock(&probe_mu_);
    stopping_ = true;
  }
  if (prober_.joinable()) prober_.join();
  // Completes every queued operation before the connections go; a write
  // deferred meanwhile fails at once (Park).
  read_queue_.reset();
  queue_.reset();
  std::vector<std::pair<std::chrono::steady_clock::time_point,
                        std::unique_ptr<Request>>>
      parked;
  {
    base::MutexLock lock(&probe_mu_);
    parked.swap(parked_);
  }
  for (auto& [due, request] : parked) {
    request->finish(*request, ClosingError());
  }
  // The next server may take the tag at once; if this fails, the claim runs
  // out by itself.
  PostgresConnection* writing = writer_->healthy_connection();
  if (!node_tag_.empty() && !node_tag_lost_ && writing != nullptr) {
    Statement release =
        internal::ReleaseNodeTag(node_tag_, *options_.node_tag_lease);
    writing->Query(release, "releasing the node tag").IgnoreError();
  }
  reader_.reset();
  writer_.reset();
}

absl::Status PostgresRangeStore::CheckHistoryOn(
    internal::PostgresConnection& c) {
  absl::StatusOr<internal::HistoryCheck> check =
      internal::CheckHistory(c, clock_->Now());
  if (!check.ok()) return check.status();
  if (check->changed && options_.on_history_went_back) {
    options_.on_history_went_back(StoreHistoryEvent{
        .reason = absl::StrFormat(
            "the history of PostgreSQL at %s changed from %s to %s (a "
            "standby was promoted, or the database was restored)",
            description_, internal::DescribeHistory(check->recorded),
            internal::DescribeHistory(check->live)),
        .collections = check->collections_moved,
        .numbers_skipped = check->numbers_skipped});
  }
  return absl::OkStatus();
}

void PostgresRangeStore::NodeTagLost(absl::string_view holder) {
  node_tag_lost_ = true;
  if (!options_.on_node_tag_lost) return;
  options_.on_node_tag_lost(internal::NodeTagLostError(
      description_, node_tag_, holder, *options_.node_tag_lease));
}

absl::Status PostgresRangeStore::ClosingError() const {
  return absl::UnavailableError(
      "the store is closing; the operation waited for a row another session "
      "held locked and was not run");
}

void PostgresRangeStore::Park(std::unique_ptr<Request> request,
                              bool postponed) {
  using Clock = std::chrono::steady_clock;
  // 2 ms, doubling up to 64 ms: a row another server holds for a
  // moment comes free within a try or two; one held longer costs a
  // short transaction every 64 ms until lock_timeout has passed.
  const auto wait = std::chrono::milliseconds(
      postponed ? 2 : 2 << std::min(request->lock_tries, 5));
  if (!postponed) ++request->lock_tries;
  {
    base::MutexLock lock(&probe_mu_);
    if (!stopping_) {
      parked_.emplace_back(Clock::now() + wait, std::move(request));
      parked_changed_ = true;
      return;
    }
  }
  request->finish(*request, ClosingError());
}

void PostgresRangeStore::ProbeLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = absl::ToChronoMilliseconds(options_.probe_interval);
  Clock::time_point next_probe = Clock::now() + interval;
  while (true) {
    bool count = false, renewal = false;
    std::vector<std::unique_ptr<Request>> due;
    {
      base::MutexLock lock(&probe_mu_);
      Clock::time_point now;
      while (true) {
        if (stopping_) return;
        now = Clock::now();
        for (auto it = parked_.begin(); it != parked_.end();) {
          if (it->first <= now) {
            due.push_back(std::move(it->second));
            it = parked_.erase(it);
          } else {
            ++it;
          }
        }
        if (!due.empty() || now >= next_probe) break;
        Clock::time_point wake = next_probe;
        for (const auto& parked : parked_) wake = std::min(wake, parked.first);
        parked_changed_ = false;
        probe_mu_.AwaitWithTimeout(
            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(probe_mu_) {
              return stopping_ || parked_changed_;
            },
            absl::FromChrono(wake - now));
      }
      if (now >= next_probe) {
        next_probe = now + interval;
        // Each on its own: a count stuck behind held reads must not hold
        // the renewal back, nor the other way round.
        count = !std::exchange(probe_pending_, true);
        renewal = !std::exchange(renew_pending_, true);
      }
    }
    for (std::unique_ptr<Request>& request : due) {
      queue_->Submit(std::move(request));
    }
    if (count) {
      auto probe = std::make_unique<Request>();
      probe->kind = Request::Kind::kProbe;
      probe->read_only = true;
      probe->done = [this](absl::Status) {
        // The batch counted the rows (collection_count_) if it could.
        base::MutexLock lock(&probe_mu_);
        probe_pending_ = false;
      };
      read_queue_->Submit(std::move(probe));
    }
    if (!renewal) continue;
    // On the write connection: a server whose writes still go through must
    // be one that still holds its tag. Renewed on the read connection, a
    // server that could not open or keep that one would go on allocating
    // under a tag whose lease ran out and another server took. Without a
    // tag it is an empty transaction, which keeps reachable() current.
    auto renew = std::make_unique<Request>();
    renew->kind = Request::Kind::kRenew;
    renew->done = [this](absl::Status) {
      base::MutexLock lock(&probe_mu_);
      renew_pending_ = false;
    };
    queue_->Submit(std::move(renew));
  }
}

template <typename T>
void PostgresRangeStore::Submit(std::unique_ptr<Request> request,
                                StoreCallback<T> done, T Request::*result) {
  Request* raw = request.get();
  request->finish = [result, done = std::move(done)](Request& ran,
                                                     absl::Status s) mutable {
    if (s.ok()) {
      done(std::move(ran.*result));
    } else {
      done(std::move(s));
    }
  };
  request->BindFinish();
  // Reads have a queue and a connection of their own: a flood of them never
  // delays a write, and the probe's count never lengthens a write batch.
  (raw->read_only ? read_queue_ : queue_)->Submit(std::move(request));
}

absl::StatusOr<std::unique_ptr<PostgresConnection>>
PostgresRangeStore::Connect() const {
  return PostgresConnection::Open(
      {.uri = options_.uri,
       .connect_timeout = options_.connect_timeout,
       .statement_timeout = options_.statement_timeout,
       .lock_timeout = options_.lock_timeout,
       .idle_in_transaction_timeout = options_.idle_in_transaction_timeout},
      description_);
}

void PostgresRangeStore::DoAllocateAsync(absl::string_view collection,
                                         int64_t size, int64_t floor,
                                         uint64_t token, int64_t max_floor_jump,
                                         bool may_create,
                                         StoreCallback<Allocation> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kAllocate;
  r->may_create = may_create;
  r->name = std::string(collection);
  r->size = size;
  r->floor = floor;
  r->max_floor_jump = max_floor_jump;
  r->token = token;
  Submit(std::move(r), std::move(done), &Request::allocation);
}

void PostgresRangeStore::DoReturnAsync(absl::string_view collection,
                                       int64_t end, int64_t last,
                                       uint64_t token,
                                       StoreCallback<ReturnOutcome> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kReturn;
  r->name = std::string(collection);
  r->end = end;
  r->last = last;
  r->token = token;
  Submit(std::move(r), std::move(done), &Request::returned);
}

void PostgresRangeStore::ReturnManyAsync(
    std::vector<ReturnItem> items,
    StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) {
  if (items.empty()) {
    return done(std::vector<absl::StatusOr<ReturnOutcome>>());
  }
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kReturnMany;
  r->items = std::move(items);
  Submit(std::move(r), std::move(done), &Request::many);
}

void PostgresRangeStore::GetAsync(
    absl::string_view collection,
    StoreCallback<std::optional<CollectionState>> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kGet;
  r->read_only = true;
  r->name = std::string(collection);
  Submit(std::move(r), std::move(done), &Request::state);
}

void PostgresRangeStore::DoListAsync(
    absl::string_view after, int limit,
    StoreCallback<std::vector<NamedCollectionState>> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kList;
  r->read_only = true;
  r->name = std::string(after);
  r->limit = limit;
  Submit(std::move(r), std::move(done), &Request::rows);
}

void PostgresRangeStore::DoSetFloorAsync(absl::string_view collection,
                                         int64_t floor,
                                         StoreCallback<FloorOutcome> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kSetFloor;
  r->name = std::string(collection);
  r->floor = floor;
  Submit(std::move(r), std::move(done), &Request::floored);
}

void PostgresRangeStore::DeleteAsync(absl::string_view collection,
                                     StoreCallback<CollectionState> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kDelete;
  r->name = std::string(collection);
  Submit(std::move(r), std::move(done), &Request::deleted);
}

void PostgresRangeStore::RetireAsync(absl::string_view collection,
                                     StoreCallback<CollectionState> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kDelete;
  r->retire = true;
  r->name = std::string(collection);
  Submit(std::move(r), std::move(done), &Request::deleted);
}

absl::Status PostgresRangeStore::PutForTesting(absl::string_view collection,
                                               const CollectionState& state) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kPut;
  r->name = std::string(collection);
  r->put = state;
  return base::Await<absl::Status>(
      [&](absl::AnyInvocable<void(absl::Status)> done) {
        r->finish = [done = std::move(done)](Request&, absl::Status s) mutable {
          done(std::move(s));
        };
        r->BindFinish();
        queue_->Submit(std::move(r));
      });
}

}  // namespace hilo
