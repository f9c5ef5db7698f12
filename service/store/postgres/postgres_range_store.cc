#include "service/store/postgres/postgres_range_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hilo/base/await.h"
#include "service/store/collection_rules.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_node_tag.h"
#include "service/store/postgres/postgres_schema.h"
#include "service/store/validation.h"

namespace hilo {
namespace {

using internal::Params;
using internal::PostgresConnection;
using internal::ReadInt64;
using internal::Result;
using internal::Statement;
using internal::Trimmed;

constexpr char kColumns[] =
    "name, max, return_floor, updated_at_us, range_token, previous_token, "
    "previous_return_floor";

constexpr int kMaxBatch = 4096;

// A row of hilo_collections, read in kColumns order, binary.
NamedCollectionState ReadRow(const PGresult* r, int row) {
  NamedCollectionState out;
  out.name.assign(PQgetvalue(r, row, 0), PQgetlength(r, row, 0));
  out.state.max = ReadInt64(r, row, 1);
  out.state.return_floor = ReadInt64(r, row, 2);
  out.state.updated_at = absl::FromUnixMicros(ReadInt64(r, row, 3));
  out.state.range_token = static_cast<uint64_t>(ReadInt64(r, row, 4));
  out.state.previous_token = static_cast<uint64_t>(ReadInt64(r, row, 5));
  out.state.previous_return_floor = ReadInt64(r, row, 6);
  return out;
}

void AddRow(absl::string_view name, const CollectionState& s, Params* p,
            std::string* values) {
  absl::StrAppend(values, values->empty() ? "(" : ", (", p->Next());
  p->Bytes(name);
  for (int64_t v :
       {s.max, s.return_floor, absl::ToUnixMicros(s.updated_at),
        static_cast<int64_t>(s.range_token),
        static_cast<int64_t>(s.previous_token), s.previous_return_floor}) {
    absl::StrAppend(values, ", ", p->Next());
    p->Int64(v);
  }
  values->append(")");
}

// "IN ($1, $2, ...)" over `names`.
std::string InList(const std::vector<std::string>& names, Params* p) {
  std::vector<std::string> refs;
  for (const std::string& name : names) {
    refs.push_back(p->Next());
    p->Bytes(name);
  }
  return absl::StrCat("IN (", absl::StrJoin(refs, ", "), ")");
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
  return absl::StrCat("postgresql://", user.empty() ? "" : user + "@",
                      get("host", get("hostaddr", "localhost").c_str()), ":",
                      get("port", "5432"), "/", get("dbname", user.c_str()));
}

// One operation of a batch: what it asks and, once run, what it got.
struct PostgresRangeStore::Request : GroupCommit::Operation {
  enum class Kind {
    kAllocate,
    kReturn,
    kSetFloor,
    kPut,
    kDelete,
    kGet,
    kList,
    kProbe,  // counts the rows; on the read connection
    kRenew   // on the write connection: renews the node tag's lease, if
             // any, and shows whether writes reach the database
  };
  Kind kind = Kind::kGet;
  std::string name;  // the collection; for kList, the name to list after
  int64_t size = 0, floor = 0, end = 0, last = 0;
  int64_t max_floor_jump = kNoFloorJumpLimit;
  uint64_t token = 0;
  int limit = 0;
  CollectionState put;  // for kPut

  bool writes() const {
    return kind == Kind::kAllocate || kind == Kind::kReturn ||
           kind == Kind::kSetFloor || kind == Kind::kPut ||
           kind == Kind::kDelete;
  }

  // Results.
  Allocation allocation;
  ReturnOutcome returned;
  FloorOutcome floored;
  CollectionState deleted;
  std::optional<CollectionState> state;
  std::vector<NamedCollectionState> rows;
  int64_t count = 0;  // kProbe: rows in the table
};

absl::StatusOr<std::unique_ptr<PostgresRangeStore>> PostgresRangeStore::Open(
    PostgresRangeStoreOptions options) {
  if (options.uri.empty()) {
    return absl::InvalidArgumentError("PostgreSQL connection string is empty");
  }
  // A statement takes at most 65,535 parameters: 7 per row written.
  if (options.max_batch < 1 || options.max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max batch is %d; on PostgreSQL it must be 1 to %d",
                        options.max_batch, kMaxBatch));
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
  absl::StatusOr<Result> count =
      c.Query("SELECT count(*) FROM hilo_collections", "counting collections");
  if (!count.ok()) return count.status();
  int64_t rows = 0;
  if (absl::SimpleAtoi(PQgetvalue(count->get(), 0, 0), &rows)) {
    store->collection_count_.store(rows);
  }
  if (store->options_.node_tag_lease.has_value()) {
    absl::StatusOr<std::string> tag = internal::ClaimNodeTag(
        c, *store->options_.node_tag_lease, store->description_);
    if (!tag.ok()) return tag.status();
    store->node_tag_ = *std::move(tag);
  }
  store->writer_.connection = *std::move(connection);

  PostgresRangeStore* raw = store.get();
  store->queue_ = std::make_unique<GroupCommit>(
      raw->options_.max_batch,
      [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->RunBatch(raw->writer_, batch);
      });
  // The reading connection opens with the first read batch.
  store->read_queue_ = std::make_unique<GroupCommit>(
      raw->options_.max_batch,
      [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->RunBatch(raw->reader_, batch);
      });
  store->prober_ = std::thread([raw] { raw->ProbeLoop(); });
  return store;
}

PostgresRangeStore::PostgresRangeStore(PostgresRangeStoreOptions options,
                                       std::string description)
    : options_(std::move(options)),
      description_(std::move(description)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()) {}

PostgresRangeStore::~PostgresRangeStore() {
  {
    base::MutexLock lock(&probe_mu_);
    stopping_ = true;
  }
  if (prober_.joinable()) prober_.join();
  // Completes every queued operation before the connections go.
  read_queue_.reset();
  queue_.reset();
  // The next server may take the tag at once; if this fails, the claim runs
  // out by itself.
  if (!node_tag_.empty() && !node_tag_lost_ && !writer_.broken &&
      writer_.connection != nullptr && writer_.connection->ok()) {
    Statement release =
        internal::ReleaseNodeTag(node_tag_, *options_.node_tag_lease);
    writer_.connection->Query(release, "releasing the node tag").IgnoreError();
  }
  reader_.connection.reset();
  writer_.connection.reset();
}

void PostgresRangeStore::NodeTagLost(absl::string_view holder) {
  node_tag_lost_ = true;
  if (!options_.on_node_tag_lost) return;
  options_.on_node_tag_lost(internal::NodeTagLostError(
      description_, node_tag_, holder, *options_.node_tag_lease));
}

void PostgresRangeStore::ProbeLoop() {
  while (true) {
    bool count = false, renewal = false;
    {
      base::MutexLock lock(&probe_mu_);
      probe_mu_.AwaitWithTimeout(
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(probe_mu_) { return stopping_; },
          options_.probe_interval);
      if (stopping_) return;
      // Each on its own: a count stuck behind held reads must not hold
      // the renewal back, nor the other way round.
      count = !std::exchange(probe_pending_, true);
      renewal = !std::exchange(renew_pending_, true);
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
  request->done = [raw, result,
                   done = std::move(done)](absl::Status s) mutable {
    if (s.ok()) {
      done(std::move(raw->*result));
    } else {
      done(std::move(s));
    }
  };
  // Reads have a queue and a connection of their own: a flood of them never
  // delays a write, and the probe's count never lengthens a write batch.
  (raw->read_only ? read_queue_ : queue_)->Submit(std::move(request));
}

void PostgresRangeStore::ChangeCountSequence() {
  base::MutexLock lock(&count_mu_);
  ++count_sequence_;
}

void PostgresRangeStore::StoreCountIfCurrent(int64_t counted,
                                             int64_t sequence) {
  base::MutexLock lock(&count_mu_);
  // Odd: a commit was in flight when the count began; changed: one began
  // since. Either may have changed the rows after the count's snapshot
  // and added its change already; the next probe counts again.
  if (sequence % 2 != 0 || count_sequence_ != sequence) return;
  collection_count_.store(counted, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<PostgresConnection>>
PostgresRangeStore::Connect() const {
  return PostgresConnection::Open(
      {.uri = options_.uri,
       .connect_timeout = options_.connect_timeout,
       .statement_timeout = options_.statement_timeout},
      description_);
}

void PostgresRangeStore::SetReachable(const Link& link, bool reachable) {
  // Only the write connection's state counts; see reachable().
  if (&link != &writer_) return;
  if (reachable_.exchange(reachable) != reachable && options_.on_reachability) {
    options_.on_reachability(reachable);
  }
}

void PostgresRangeStore::LostConnection(Link& link) {
  link.broken = true;
  SetReachable(link, false);
}

absl::Status PostgresRangeStore::EnsureConnected(Link& link) {
  if (link.connection != nullptr && link.connection->ok() && !link.broken) {
    return absl::OkStatus();
  }
  link.connection.reset();
  link.broken = false;
  absl::StatusOr<std::unique_ptr<PostgresConnection>> connection = Connect();
  if (!connection.ok()) {
    SetReachable(link, false);
    return connection.status();
  }
  link.connection = *std::move(connection);
  return absl::OkStatus();
}

void PostgresRangeStore::RunBatch(
    Link& link, absl::Span<GroupCommit::Operation* const> ops) {
  std::vector<Request*> batch;
  batch.reserve(ops.size());
  bool reads = false;
  for (GroupCommit::Operation* op : ops) {
    batch.push_back(static_cast<Request*>(op));
    const Request::Kind kind = batch.back()->kind;
    reads |= kind == Request::Kind::kGet || kind == Request::Kind::kList;
  }
  if (reads && options_.before_read_batch_for_testing) {
    options_.before_read_batch_for_testing();
  }
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (absl::Status s = EnsureConnected(link); !s.ok()) {
      for (Request* r : batch) r->status = s;
      return;
    }
    if (RunBatchOnce(link, batch) == Attempt::kDone) return;
  }
  for (Request* r : batch) {
    r->status = absl::UnavailableError(absl::StrFormat(
        "PostgreSQL at %s: the transaction failed %d times on conflicts "
        "with other servers (serialization failures, deadlocks or "
        "collections created at the same moment); nothing was changed",
        description_, options_.max_attempts));
  }
}

PostgresRangeStore::Attempt PostgresRangeStore::RunBatchOnce(
    Link& link, absl::Span<Request* const> batch) {
  PostgresConnection& c = *link.connection;
  // Each attempt starts from nothing: no result of an earlier one survives.
  for (Request* r : batch) {
    r->status = absl::OkStatus();
    r->allocation = Allocation{};
    r->returned = ReturnOutcome{};
    r->floored = FloorOutcome{};
    r->deleted = CollectionState{};
    r->state.reset();
    r->rows.clear();
    r->count = 0;
  }
  // Fails every request (or only the writes) with `s`, ending the
  // transaction; a failure the database may clear by itself is retried.
  // Filled once the rows are read.
  struct Row {
    std::optional<CollectionState> stored;
    std::optional<CollectionState> now;
    bool dirty = false;
  };
  std::map<std::string, Row> rows;
  auto fail = [&](absl::Status s, bool writes_only) -> Attempt {
    if (!link.broken &&
        (!c.ok() ||
         (c.InTransaction() && !c.Exec("ROLLBACK", "rolling back").ok()))) {
      LostConnection(link);
    }
    for (Request* r : batch) {
      if (!writes_only || r->writes()) {
        r->status = s;
      } else if (r->kind == Request::Kind::kGet) {
        // Nothing of the batch is stored: answer what is.
        auto it = rows.find(r->name);
        r->state = it != rows.end() ? it->second.stored : std::nullopt;
      }
    }
    return Attempt::kDone;
  };
  // A conflict another attempt may clear: ends the transaction and runs the
  // batch again, unless that cost the connection; then everything fails
  // with `s` (nothing was committed).
  auto retry = [&](const absl::Status& conflict) -> Attempt {
    fail(absl::UnavailableError(absl::StrFormat(
             "PostgreSQL at %s: a transaction rolled back on a conflict (%s) "
             "could not run again, the connection failed; nothing was "
             "committed",
             description_, conflict.message())),
         /*writes_only=*/false);
    return link.broken ? Attempt::kDone : Attempt::kRetry;
  };
  auto retryable = [](const PGresult* r) {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return state != nullptr &&
           (std::strcmp(state, "40001") == 0 ||  // serialization failure
            std::strcmp(state, "40P01") == 0 ||  // deadlock
            std::strcmp(state, "23505") == 0);   // collection created meanwhile
  };

  // Phase one: begin, lock and read the rows written, read the rest.
  std::vector<std::string> written, read;
  bool any_write = false;
  for (Request* r : batch) {
    if (r->writes()) {
      written.push_back(r->name);
      any_write = true;
    } else if (r->kind == Request::Kind::kGet) {
      read.push_back(r->name);
    }
  }
  std::sort(written.begin(), written.end());
  written.erase(std::unique(written.begin(), written.end()), written.end());
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  read.erase(std::remove_if(read.begin(), read.end(),
                            [&](const std::string& name) {
                              return std::binary_search(written.begin(),
                                                        written.end(), name);
                            }),
             read.end());

  std::vector<Statement> first;
  first.push_back({"BEGIN ISOLATION LEVEL READ COMMITTED", {}});
  int locked_at = -1, read_at = -1;
  if (!written.empty()) {
    locked_at = static_cast<int>(first.size());
    Statement s;
    // In name order, so two servers lock shared rows in the same order.
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(written, &s.params),
                         " ORDER BY name FOR UPDATE");
    first.push_back(std::move(s));
  }
  if (!read.empty()) {
    read_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(read, &s.params));
    first.push_back(std::move(s));
  }
  std::vector<int> list_at(batch.size(), -1);
  int renew_at = -1;  // the node tag's renewal, once per batch
  // count_sequence_ before the probe's count(*) was sent.
  std::optional<int64_t> counted_at;
  for (size_t i = 0; i < batch.size(); ++i) {
    Request* r = batch[i];
    if (r->kind == Request::Kind::kList) {
      list_at[i] = static_cast<int>(first.size());
      Statement s;
      s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                           "name > ", s.params.Next());
      s.params.Bytes(r->name);
      absl::StrAppend(&s.sql, " ORDER BY name LIMIT ", s.params.Next());
      s.params.Int32(r->limit);
      first.push_back(std::move(s));
    } else if (r->kind == Request::Kind::kProbe) {
      if (!counted_at.has_value()) {
        base::MutexLock lock(&count_mu_);
        counted_at = count_sequence_;
      }
      list_at[i] = static_cast<int>(first.size());
      first.push_back({"SELECT count(*)::BIGINT FROM hilo_collections", {}});
    } else if (r->kind == Request::Kind::kRenew) {
      if (renew_at < 0 && !node_tag_.empty() && !node_tag_lost_) {
        renew_at = static_cast<int>(first.size());
        first.push_back(
            internal::RenewNodeTag(node_tag_, *options_.node_tag_lease));
      }
    }
  }
  // A batch that only reads ends here.
  if (!any_write) first.push_back({"COMMIT", {}});

  std::vector<Result> results;
  if (absl::Status s = c.Pipeline(first, &results); !s.ok()) {
    // Results may be left unread: the connection is out of step for good.
    LostConnection(link);
    return fail(s, /*writes_only=*/false);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ExecStatusType status = PQresultStatus(results[i].get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) continue;
    if (retryable(results[i].get())) {
      return retry(c.Error(results[i].get(), "reading collections"));
    }
    return fail(c.Error(results[i].get(), i == 0 ? "beginning a transaction"
                                                 : "reading collections"),
                /*writes_only=*/false);
  }
  SetReachable(link, true);
  if (renew_at >= 0) {
    if (std::optional<std::string> holder = internal::NodeTagTakenBy(
            c, results[renew_at].get(), node_tag_, *options_.node_tag_lease)) {
      NodeTagLost(*holder);
    }
  }

  // Rows in the table before this batch, if a probe counted them.
  std::optional<int64_t> counted;
  // The rows as stored, then as the batch leaves them.
  for (int at : {locked_at, read_at}) {
    if (at < 0) continue;
    const PGresult* r = results[at].get();
    for (int i = 0; i < PQntuples(r); ++i) {
      NamedCollectionState row = ReadRow(r, i);
      rows[row.name].stored = row.state;
      rows[row.name].now = row.state;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Request* r = batch[i];
    if (list_at[i] >= 0) {
      const PGresult* result = results[list_at[i]].get();
      if (r->kind == Request::Kind::kProbe) {
        r->count = ReadInt64(result, 0, 0);
        counted = r->count;
        continue;
      }
      r->rows.clear();
      for (int j = 0; j < PQntuples(result); ++j) {
        r->rows.push_back(ReadRow(result, j));
      }
      continue;
    }
    if (r->kind == Request::Kind::kGet) {
      // As the batch leaves it so far (as stored, if the commit fails).
      auto it = rows.find(r->name);
      r->state = it != rows.end() ? it->second.now : std::nullopt;
      continue;
    }
    if (r->kind == Request::Kind::kRenew) continue;  // judged above
    Row& row = rows[r->name];
    const absl::Time now = clock_->Now();
    switch (r->kind) {
      case Request::Kind::kAllocate: {
        absl::StatusOr<CollectionState> next = ApplyAllocate(
            r->name, row.now.value_or(CollectionState{}), r->size, r->floor,
            r->max_floor_jump, r->token, now, &r->allocation.range);
        if (!next.ok()) {
          r->status = next.status();
          break;
        }
        r->allocation.created = !row.now.has_value();
        row.now = *next;
        row.dirty = true;
        break;
      }
      case Request::Kind::kReturn: {
        if (!row.now.has_value()) {
          r->returned = ReturnOutcome{false, 0};
          break;
        }
        std::optional<CollectionState> next =
            ApplyReturn(*row.now, r->end, r->last, r->token, now, &r->returned);
        if (next.has_value()) {
          row.now = *next;
          row.dirty = true;
        }
        break;
      }
      case Request::Kind::kSetFloor: {
        std::optional<CollectionState> next = ApplySetFloor(
            row.now.value_or(CollectionState{}), r->floor, now, &r->floored);
        if (next.has_value() || !row.now.has_value()) {
          r->floored.created = !row.now.has_value();
          row.now = next.value_or(CollectionState{.updated_at = now});
          row.dirty = true;
        }
        break;
      }
      case Request::Kind::kPut:
        row.now = r->put;
        row.dirty = true;
        break;
      case Request::Kind::kDelete: {
        if (!row.now.has_value()) {
          r->status = absl::NotFoundError(absl::StrFormat(
              "collection \"%s\" has no row; there is nothing to delete",
              r->name));
          break;
        }
        if (absl::Status s = CheckDeletable(r->name, *row.now); !s.ok()) {
          r->status = std::move(s);
          break;
        }
        r->deleted = *row.now;
        row.now.reset();
        row.dirty = true;
        break;
      }
      default:
        break;
    }
  }

  if (!any_write && counted.has_value()) {
    if (options_.before_count_stored_for_testing) {
      options_.before_count_stored_for_testing();
    }
    StoreCountIfCurrent(*counted, *counted_at);
  }

  // Phase two: write what changed and commit.
  Statement insert, update;
  std::string inserted, updated;
  std::vector<std::string> deleted;
  int64_t created = 0;  // less the rows deleted
  for (const auto& [name, row] : rows) {
    if (!row.dirty) continue;
    if (!row.now.has_value()) {
      // Deleted; a row the batch created and deleted was never stored.
      if (row.stored.has_value()) {
        deleted.push_back(name);
        --created;
      }
    } else if (row.stored.has_value()) {
      AddRow(name, *row.now, &update.params, &updated);
    } else {
      AddRow(name, *row.now, &insert.params, &inserted);
      ++created;
    }
  }
  std::vector<Statement> second;
  if (!inserted.empty()) {
    // No ON CONFLICT: a row another server created meanwhile fails the
    // batch, which then runs again on that row.
    insert.sql = absl::StrCat("INSERT INTO hilo_collections (", kColumns,
                              ") VALUES ", inserted);
    second.push_back(std::move(insert));
  }
  if (!updated.empty()) {
    // Rows this transaction holds locked: the conflict is certain.
    update.sql = absl::StrCat(
        "INSERT INTO hilo_collections (", kColumns, ") VALUES ", updated,
        " ON CONFLICT (name) DO UPDATE SET max = excluded.max, "
        "return_floor = excluded.return_floor, "
        "updated_at_us = excluded.updated_at_us, "
        "range_token = excluded.range_token, "
        "previous_token = excluded.previous_token, "
        "previous_return_floor = excluded.previous_return_floor");
    second.push_back(std::move(update));
  }
  if (!deleted.empty()) {
    // Rows this transaction holds locked: no other server can use them
    // between the rule's check and the delete.
    Statement remove;
    remove.sql = absl::StrCat("DELETE FROM hilo_collections WHERE name ",
                              InList(deleted, &remove.params));
    second.push_back(std::move(remove));
  }
  if (any_write) {
    // A COMMIT cancelled while it waits for a synchronous standby (by a
    // timeout, say) still answers COMMIT, with only a warning that it may
    // not be replicated: no timeout for it, and a warning fails the writes.
    second.push_back({"SET LOCAL statement_timeout = 0", {}});
    second.push_back({"COMMIT", {}});
  }

  if (!second.empty()) {
    // From here until this attempt ends, rows may be created or deleted:
    // a probe that counts meanwhile must not store what it saw.
    if (created != 0) ChangeCountSequence();
    absl::Cleanup count_settled = [&] {
      if (created != 0) ChangeCountSequence();
    };
    const absl::Time commit_start = absl::Now();
    c.TakeWarning();
    absl::Status sent =
        c.Pipeline(second, &results, options_.after_commit_sent_for_testing);
    if (!sent.ok()) {
      LostConnection(link);
      // Perhaps during COMMIT: whether it applied is unknown, so nothing
      // may be reported applied. Reads were answered before it.
      return fail(absl::UnavailableError(absl::StrCat(
                      sent.message(),
                      "; the outcome of the commit is unknown, nothing is "
                      "reported applied")),
                  /*writes_only=*/true);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      PGresult* r = results[i].get();
      const ExecStatusType status = PQresultStatus(r);
      const bool commit = i + 1 == results.size();
      // COMMIT of a transaction that failed answers ROLLBACK.
      if (status == PGRES_COMMAND_OK &&
          (!commit || std::strcmp(PQcmdStatus(r), "COMMIT") == 0)) {
        continue;
      }
      if (status == PGRES_FATAL_ERROR && retryable(r)) {
        return retry(c.Error(r, "writing collections"));
      }
      return fail(
          status == PGRES_FATAL_ERROR
              ? c.Error(r, commit ? "committing" : "writing collections")
              : absl::UnavailableError(absl::StrFormat(
                    "committing on PostgreSQL at %s: the transaction "
                    "was rolled back",
                    description_)),
          /*writes_only=*/true);
    }
    if (std::string warning = c.TakeWarning(); !warning.empty()) {
      return fail(absl::UnavailableError(absl::StrFormat(
                      "committing on PostgreSQL at %s: %s; the commit may be "
                      "lost if the database fails over, so nothing is "
                      "reported applied",
                      description_, warning)),
                  /*writes_only=*/true);
    }
    const absl::Duration commit_time = absl::Now() - commit_start;
    // A probe's count runs on the read connection, never in a batch that
    // writes (StoreCountIfCurrent stores it): here the count only moves.
    collection_count_.fetch_add(created, std::memory_order_relaxed);
    if (options_.on_commit) {
      options_.on_commit(commit_time, static_cast<int>(batch.size()),
                         collection_count_.load(std::memory_order_relaxed));
    }
  }
  return Attempt::kDone;
}

void PostgresRangeStore::DoAllocateAsync(absl::string_view collection,
                                         int64_t size, int64_t floor,
                                         uint64_t token, int64_t max_floor_jump,
                                         StoreCallback<Allocation> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kAllocate;
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

absl::Status PostgresRangeStore::PutForTesting(absl::string_view collection,
                                               const CollectionState& state) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kPut;
  r->name = std::string(collection);
  r->put = state;
  return base::Await<absl::Status>(
      [&](absl::AnyInvocable<void(absl::Status)> done) {
        r->done = std::move(done);
        queue_->Submit(std::move(r));
      });
}

}  // namespace hilo
