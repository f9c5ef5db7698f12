// libFuzzer target: one node's store and its clients, played from the input.
// This file decodes the input into operations and drives them: Allocate,
// Return, SetFloor, Delete and Get through RangeStore, some queued together
// into one batch (group commit), with clean restarts and restarts from the
// files a killed process leaves. StoreUnderTest (store_under_test.h) picks
// the engine: SQLite over a scratch file, or PostgreSQL when
// $HILO_FUZZ_POSTGRES_URI is set. Every answer goes to the collection's
// CollectionModel (contract_model.h), which holds the rules of the contract
// and the safety ledger and fails the run at the first answer they forbid;
// the stored row of the collection is checked after every step, every row
// after each restart and at the end.
//
// The clients the fuzzer plays:
//   - Allocate: a client takes a range with a token the fuzzer makes up
//     (distinct, never 0), now and then a size, floor or token the contract
//     refuses.
//   - A holder hands back the tail of one of its ranges with its token; it
//     stops using the tail before it sends the return.
//   - A client holding two adjacent ranges returns the later one whole, then
//     the tail of the earlier one (README: both apply, Max ends at the last
//     number it used).
//   - The network delivers again a return a holder sent with its token (a
//     retry, a duplicate, a late copy after the numbers were issued again).
//   - A caller that holds nothing guesses a token (1, a power of two, the
//     live one +1 or ^1, any 64 bits, an earlier range's): never one that
//     may be live.
//   - A buggy holder sends any end and last with its live token; an old
//     client (no token) returns the tail of its own range ending at `end`,
//     if it holds one; otherwise nothing is sent (a tokenless return from
//     anyone else is unsafe by the contract, so its outcome proves nothing).
//   - SetFloor at, below and above Max; Delete, sometimes after every holder
//     returned its range whole.
//   - A batch: up to four allocations, returns and floors queued at once,
//     and the returns of several holders in one ReturnMany; judged in the
//     order queued, or, when they ran on two PostgreSQL pods at once
//     (StoreUnderTest::concurrent), in any order that explains every
//     answer.
//
// On PostgreSQL, StoreUnderTest opens two stores on one database (two pods
// of one node); calls made alone go to them in turn.
//
// Build and run: fuzz/run_fuzz.sh [seconds] [build dir].
//
// Built with HILO_FUZZ_TRACE (fuzz_seed_replay, fuzz/seed_replay.cmake),
// every step writes its operation and each store call with the parameters it
// decoded to stdout; the seed test compares that against fuzz/seed_traces/.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fuzz/contract_model.h"
#include "fuzz/fuzz_report.h"
#include "fuzz/store_under_test.h"

namespace hilo::fuzz {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Collection names the sequences draw from (the store takes any bytes; the
// service validates names before they get here).
const char* const kCollections[] = {"orders", "a", "\xC3\x9F-\xE2\x82\xAC"};

// A return a holder sent with its token, which the network may deliver again.
struct SentReturn {
  int64_t end = 0;
  int64_t last = 0;
  uint64_t token = 0;
  size_t sender = 0;
};

// Waits for the completions of a batch of asynchronous calls; a batch that
// does not complete in a minute fails the run.
class Completions {
 public:
  // Counts one more call to wait for.
  void Expect() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
  }
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::minutes(1),
                      [&] { return pending_ == 0; })) {
      Fail(absl::StrCat(pending_,
                        " calls of a batch still pending after 1 min"));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
};

class Driver {
 public:
  Driver() {
    for (const char* name : kCollections) models_.emplace(name, name);
  }

  void Step(FuzzedDataProvider& in) {
    const std::string name = PickCollection(in);
    // The seeds in fuzz/corpus/ hold each operation's number itself in its
    // byte, which any pick of 0..N (N >= 10) reads the same: a new operation
    // takes the next number and they keep their meaning. Renumbering, or
    // changing what an operation consumes, makes them replay other
    // operations than the ones they were saved for; the seed test
    // (fuzz/seed_replay.cmake) then fails naming them, and they must be
    // re-derived to replay their traces in fuzz/seed_traces/ again.
    static constexpr const char* kOps[14] = {
        "Allocate",     "Allocate", "ReturnHeld",       "ReturnHeld",
        "AdjacentPair", "Replay",   "ReturnWrongToken", "ReturnAnything",
        "SetFloor",     "SetFloor", "Restart",          "Delete",
        "CrashRestart", "Batch"};
    const int op = in.ConsumeIntegralInRange<int>(0, 13);
    Trace(kOps[op], " on ", name);
    switch (op) {
      case 0:
      case 1:
        AllocateAny(in, name);
        break;
      case 2:
      case 3:
        ReturnHeld(in, name);
        break;
      case 4:
        AdjacentPair(in, name);
        break;
      case 5:
        Replay(in, name);
        break;
      case 6:
        ReturnWrongToken(in, name);
        break;
      case 7:
        ReturnAnything(in, name);
        break;
      case 8:
      case 9:
        SetFloor(in, name);
        break;
      case 10:
        store_.Restart();
        CheckStored("after a restart");
        break;
      case 11:
        Delete(in, name);
        break;
      case 12:
        store_.CrashRestart();
        CheckStored("after a restart from a killed process's files");
        break;
      case 13:
        Batch(in);
        CheckStored("after a batch");
        break;
    }
    CheckStored(name, "after a step");
  }

  void CheckStored(absl::string_view when) {
    for (const char* name : kCollections) CheckStored(name, when);
  }

 private:
  static std::string PickCollection(FuzzedDataProvider& in) {
    return kCollections[in.ConsumeIntegralInRange<size_t>(
        0, std::size(kCollections) - 1)];
  }

  void CheckStored(const std::string& name, absl::string_view when) {
    models_.at(name).CheckStored(store_.store().Get(store_.Stored(name)), when);
  }

  // A fresh token: distinct from every other of this input (splitmix64's
  // finalizer is a bijection), never 0, and the same for the same input, so
  // a crash replays.
  uint64_t NewToken() {
    for (;;) {
      uint64_t z = ++tokens_made_ * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      if (z != 0) return z;
    }
  }

  // A size or floor: mostly small, sometimes at the edges of int64.
  static int64_t Number(FuzzedDataProvider& in, int64_t near) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
        return in.ConsumeIntegralInRange<int64_t>(0, 64);
      case 1:
        return in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 20);
      case 2: {
        const int64_t delta = in.ConsumeIntegralInRange<int64_t>(-40, 40);
        // `near` may be any int64 (a fuzzed end): saturate, never wrap.
        if (delta > 0 && near > kInt64Max - delta) return kInt64Max;
        if (delta < 0 && near < kInt64Min - delta) return kInt64Min;
        return near + delta;
      }
      case 3:
        return kInt64Max - in.ConsumeIntegralInRange<int64_t>(0, 100);
      default:
        return in.ConsumeIntegral<int64_t>();
    }
  }

  // What an allocation asks for, decoded.
  struct AllocateCall {
    int64_t size, floor;
    uint64_t token;
  };
  AllocateCall DecodeAllocate(FuzzedDataProvider& in, const std::string& name) {
    const int64_t size = Number(in, 32);
    const int64_t floor =
        in.ConsumeBool() ? 0 : Number(in, models_.at(name).max());
    // Now and then a token the contract forbids.
    const uint64_t token =
        in.ConsumeIntegralInRange<int>(0, 15) == 0 ? 0 : NewToken();
    return {size, floor, token};
  }

  void AllocateAny(FuzzedDataProvider& in, const std::string& name) {
    const AllocateCall c = DecodeAllocate(in, name);
    Allocate(name, c.size, c.floor, c.token);
  }

  std::optional<size_t> Allocate(const std::string& name, int64_t size,
                                 int64_t floor, uint64_t token) {
    const std::string call = absl::StrFormat(
        "Allocate(%s, size %d, floor %d, token %#x)", name, size, floor, token);
    Trace("  ", call);
    return models_.at(name).Allocate(
        size, floor, token,
        store_.pod(next_pod_++)
            .Allocate(store_.Stored(name), size, floor, token),
        call);
  }

  // Which holder returns what, decoded; nullopt when nobody holds anything.
  std::optional<SentReturn> DecodeHeldReturn(FuzzedDataProvider& in,
                                             const std::string& name) {
    const std::vector<Holding>& holdings = models_.at(name).holdings();
    std::vector<size_t> held;
    for (size_t i = 0; i < holdings.size(); ++i) {
      if (!holdings[i].sent_return) held.push_back(i);
    }
    if (held.empty()) return std::nullopt;
    const size_t i =
        in.ConsumeBool()
            ? held.back()
            : held[in.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
    const Holding& h = holdings[i];
    const int64_t last =
        in.ConsumeIntegralInRange<int64_t>(h.issued.low - 1, h.used_high);
    return SentReturn{h.issued.high, last, h.token, i};
  }

  // A holder hands back the unused tail of one of its ranges, the range
  // last issued more often than not.
  void ReturnHeld(FuzzedDataProvider& in, const std::string& name) {
    if (std::optional<SentReturn> r = DecodeHeldReturn(in, name)) {
      SendAsHolder(name, *r);
    }
  }

  void SendAsHolder(const std::string& name, const SentReturn& r) {
    models_.at(name).HolderReturns(r.sender, r.last);
    sent_[name].push_back(r);
    Return(name, r.end, r.last, r.token, r.sender, "a holder's");
  }

  // A client that fetched ahead holds two adjacent ranges; it returns the
  // later one whole, then the unused tail of the earlier one.
  void AdjacentPair(FuzzedDataProvider& in, const std::string& name) {
    std::optional<size_t> first = Allocate(
        name, in.ConsumeIntegralInRange<int64_t>(1, 64), 0, NewToken());
    if (!first.has_value()) return;
    CheckStored(name, "after the first range of a pair");
    std::optional<size_t> second = Allocate(
        name, in.ConsumeIntegralInRange<int64_t>(1, 64), 0, NewToken());
    if (!second.has_value()) return;
    CheckStored(name, "after the second range of a pair");
    CollectionModel& m = models_.at(name);
    const Holding later = m.holdings()[*second];
    SendAsHolder(
        name, {later.issued.high, later.issued.low - 1, later.token, *second});
    CheckStored(name, "after the whole return of the second range of a pair");
    const Holding earlier = m.holdings()[*first];
    const int64_t last = in.ConsumeIntegralInRange<int64_t>(
        earlier.issued.low - 1, earlier.issued.high);
    SendAsHolder(name, {earlier.issued.high, last, earlier.token, *first});
    // README, "A pair of adjacent ranges": "Max ends at the last number the
    // client used".
    if (m.max() != last) {
      Fail(absl::StrFormat(
          "%s: a client returned %d-%d whole and then %d-%d down to %d; Max "
          "is %d, not %d",
          name, later.issued.low, later.issued.high, earlier.issued.low,
          earlier.issued.high, last, m.max(), last));
    }
  }

  // The network delivers again a return a holder sent before.
  void Replay(FuzzedDataProvider& in, const std::string& name) {
    const std::vector<SentReturn>& sent = sent_[name];
    if (sent.empty()) return;
    const SentReturn r =
        in.ConsumeBool()
            ? sent.back()
            : sent[in.ConsumeIntegralInRange<size_t>(0, sent.size() - 1)];
    Return(name, r.end, r.last, r.token, r.sender, "a repeated");
  }

  // A caller that holds nothing tries a token that cannot be live.
  void ReturnWrongToken(FuzzedDataProvider& in, const std::string& name) {
    const CollectionModel& m = models_.at(name);
    const uint64_t live = m.LiveToken();
    uint64_t token = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        token = 1;
        break;
      case 1:
        token = uint64_t{1} << in.ConsumeIntegralInRange<int>(0, 63);
        break;
      case 2:
        token = live + 1;
        break;
      case 3:
        token = live ^ 1;
        break;
      case 4:
        // An earlier range's token (the one before the last, too).
        if (!m.holdings().empty()) {
          token = m.holdings()[in.ConsumeIntegralInRange<size_t>(
                                   0, m.holdings().size() - 1)]
                      .token;
        }
        break;
      default:
        token = in.ConsumeIntegral<uint64_t>();
        break;
    }
    while (token == 0 || m.MayBeLive(token)) token += 2;
    const int64_t end = in.ConsumeBool() ? m.max() : Number(in, m.max());
    const int64_t last =
        in.ConsumeBool() ? Number(in, m.return_floor()) : Number(in, end);
    Return(name, end, last, token, std::nullopt, "a wrong token's");
  }

  // A buggy holder with the live token, or an old client without one.
  void ReturnAnything(FuzzedDataProvider& in, const std::string& name) {
    CollectionModel& m = models_.at(name);
    const int64_t end = in.ConsumeBool() ? m.max() : Number(in, m.max());
    const int64_t last =
        in.ConsumeBool() ? Number(in, m.return_floor()) : Number(in, end);
    const uint64_t token = in.ConsumeBool() ? 0 : m.LiveToken();
    std::optional<size_t> sender;
    for (size_t i = 0; i < m.holdings().size(); ++i) {
      const Holding& h = m.holdings()[i];
      if (token != 0 ? h.token == token
                     : !h.sent_return && h.issued.high == end &&
                           h.issued.low - 1 <= last && last <= h.used_high) {
        sender = i;
      }
    }
    if (!sender.has_value()) {
      Trace("  no holder sends it");
      return;
    }
    if (0 <= last && last <= end) m.HolderReturns(*sender, last);
    Return(name, end, last, token, sender,
           token == 0 ? "an old client's" : "a buggy holder's");
  }

  void Return(const std::string& name, int64_t end, int64_t last,
              uint64_t token, std::optional<size_t> sender,
              absl::string_view who) {
    const std::string call =
        absl::StrFormat("%s Return(%s, end %d, last %d, token %#x)", who, name,
                        end, last, token);
    Trace("  ", call);
    models_.at(name).Return(
        end, last, token, sender,
        store_.pod(next_pod_++).Return(store_.Stored(name), end, last, token),
        call);
  }

  int64_t DecodeFloor(FuzzedDataProvider& in, const std::string& name) {
    // At or below Max as often as above it.
    const int64_t max = models_.at(name).max();
    if (in.ConsumeBool() && max > 0) {
      return in.ConsumeIntegralInRange<int64_t>(0, max);
    }
    return Number(in, max);
  }

  void SetFloor(FuzzedDataProvider& in, const std::string& name) {
    const int64_t floor = DecodeFloor(in, name);
    const std::string call = absl::StrFormat("SetFloor(%s, %d)", name, floor);
    Trace("  ", call);
    models_.at(name).SetFloor(
        floor, store_.pod(next_pod_++).SetFloor(store_.Stored(name), floor),
        call);
  }

  // Half the time the holders first return every range they hold whole,
  // newest first, which brings a collection of only those ranges back to
  // Max 0 (README: the pair rule, "as if the later range had never been
  // issued").
  void Delete(FuzzedDataProvider& in, const std::string& name) {
    CollectionModel& m = models_.at(name);
    if (in.ConsumeBool()) {
      for (size_t i = m.holdings().size(); i-- > 0;) {
        const Holding h = m.holdings()[i];
        if (h.sent_return) continue;
        SendAsHolder(name, {h.issued.high, h.issued.low - 1, h.token, i});
      }
    }
    const std::string call = absl::StrCat("Delete(", name, ")");
    Trace("  ", call);
    m.Delete(store_.pod(next_pod_++).Delete(store_.Stored(name)), call);
  }

  // Up to four calls queued at once (one commit, or a few), then one
  // ReturnMany of holders' returns. With one store they are judged in the
  // order queued. With two pods at once (store_.concurrent()) call number
  // i goes to pod i, so calls on one row collide in two sessions; they ran
  // concurrently, so the contract asks only that some order of them explain
  // every answer: each order is tried on a copy of the models, the order
  // queued first, and the run fails when none does.
  void Batch(FuzzedDataProvider& in) {
    using Models = std::map<std::string, CollectionModel>;
    const bool concurrent = store_.concurrent();
    auto pod = [&](size_t i) -> RangeStore& {
      return concurrent ? store_.pod(i) : store_.store();
    };
    Completions completions;
    std::vector<std::function<void(Models&)>> judge;
    const int calls = in.ConsumeIntegralInRange<int>(1, 4);
    for (int c = 0; c < calls; ++c) {
      const std::string name = PickCollection(in);
      switch (in.ConsumeIntegralInRange<int>(0, 2)) {
        case 0: {
          const AllocateCall a = DecodeAllocate(in, name);
          const std::string call = absl::StrFormat(
              "queued Allocate(%s, size %d, floor %d, "
              "token %#x)",
              name, a.size, a.floor, a.token);
          Trace("  ", call);
          auto got = std::make_shared<absl::StatusOr<Allocation>>();
          completions.Expect();
          pod(judge.size())
              .AllocateAsync(
                  store_.Stored(name), a.size, a.floor, a.token,
                  kNoFloorJumpLimit,
                  [got, &completions](absl::StatusOr<Allocation> out) {
                    *got = std::move(out);
                    completions.Done();
                  });
          judge.push_back([name, a, got, call](Models& models) {
            models.at(name).Allocate(a.size, a.floor, a.token,
                                     got->ok()
                                         ? absl::StatusOr<Range>((*got)->range)
                                         : absl::StatusOr<Range>(got->status()),
                                     call);
          });
          break;
        }
        case 1: {
          std::optional<SentReturn> r = DecodeHeldReturn(in, name);
          if (!r.has_value()) break;
          models_.at(name).HolderReturns(r->sender, r->last);
          sent_[name].push_back(*r);
          const std::string call = absl::StrFormat(
              "a holder's queued Return(%s, end %d, last %d, token %#x)", name,
              r->end, r->last, r->token);
          Trace("  ", call);
          auto got = std::make_shared<absl::StatusOr<ReturnOutcome>>();
          completions.Expect();
          pod(judge.size())
              .ReturnAsync(
                  store_.Stored(name), r->end, r->last, r->token,
                  [got, &completions](absl::StatusOr<ReturnOutcome> out) {
                    *got = std::move(out);
                    completions.Done();
                  });
          judge.push_back([name, r = *r, got, call](Models& models) {
            models.at(name).Return(r.end, r.last, r.token, r.sender, *got,
                                   call);
          });
          break;
        }
        default: {
          const int64_t floor = DecodeFloor(in, name);
          const std::string call =
              absl::StrFormat("queued SetFloor(%s, %d)", name, floor);
          Trace("  ", call);
          auto got = std::make_shared<absl::StatusOr<FloorOutcome>>();
          completions.Expect();
          pod(judge.size())
              .SetFloorAsync(
                  store_.Stored(name), floor,
                  [got, &completions](absl::StatusOr<FloorOutcome> out) {
                    *got = std::move(out);
                    completions.Done();
                  });
          judge.push_back([name, floor, got, call](Models& models) {
            models.at(name).SetFloor(floor, *got, call);
          });
          break;
        }
      }
    }
    // Then returns of up to four holders (the same holder twice, sometimes)
    // in one ReturnMany.
    std::vector<ReturnItem> items;
    std::vector<std::pair<std::string, SentReturn>> sent;
    const int returns = in.ConsumeIntegralInRange<int>(0, 4);
    for (int i = 0; i < returns; ++i) {
      const std::string name = PickCollection(in);
      std::optional<SentReturn> r;
      if (in.ConsumeBool() && !sent_[name].empty()) {
        r = sent_[name].back();  // a copy of the holder's last return
      } else {
        r = DecodeHeldReturn(in, name);
      }
      if (!r.has_value()) continue;
      models_.at(name).HolderReturns(r->sender, r->last);
      sent_[name].push_back(*r);
      Trace("  ReturnMany item: ", name, " end ", r->end, " last ", r->last,
            absl::StrFormat(" token %#x", r->token));
      items.push_back(
          ReturnItem{store_.Stored(name), r->end, r->last, r->token, false});
      sent.emplace_back(name, *r);
    }
    if (!items.empty()) {
      auto outcomes = std::make_shared<
          absl::StatusOr<std::vector<absl::StatusOr<ReturnOutcome>>>>();
      completions.Expect();
      pod(judge.size())
          .ReturnManyAsync(
              std::move(items),
              [outcomes, &completions](
                  absl::StatusOr<std::vector<absl::StatusOr<ReturnOutcome>>>
                      out) {
                *outcomes = std::move(out);
                completions.Done();
              });
      judge.push_back([sent, outcomes](Models& models) {
        if (!outcomes->ok()) {
          Fail(absl::StrCat("ReturnMany of ", sent.size(),
                            " items: ", outcomes->status().ToString()));
        }
        if ((*outcomes)->size() != sent.size()) {
          Fail(absl::StrFormat("ReturnMany of %d items gave %d outcomes",
                               sent.size(), (*outcomes)->size()));
        }
        for (size_t i = 0; i < sent.size(); ++i) {
          const auto& [name, r] = sent[i];
          models.at(name).Return(
              r.end, r.last, r.token, r.sender, (**outcomes)[i],
              absl::StrFormat("item %d of a ReturnMany: Return(%s, end %d, "
                              "last %d, token %#x)",
                              i, name, r.end, r.last, r.token));
        }
      });
    }
    completions.Wait();
    if (!concurrent) {
      for (auto& j : judge) j(models_);
      return;
    }
    std::vector<size_t> order(judge.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::string refused;  // why the order queued is not one
    do {
      Models trial = models_;
      try {
        Trial open;
        for (size_t i : order) judge[i](trial);
      } catch (const ContractBroken& broken) {
        if (refused.empty()) refused = broken.what;
        continue;
      }
      models_ = std::move(trial);
      return;
    } while (std::next_permutation(order.begin(), order.end()));
    Fail(absl::StrCat(refused, " (and no other order of the ", judge.size(),
                      " calls that ran concurrently on two pods explains "
                      "their answers)"));
  }

  StoreUnderTest store_;
  std::map<std::string, CollectionModel> models_;
  std::map<std::string, std::vector<SentReturn>> sent_;
  uint64_t tokens_made_ = 0;
  size_t next_pod_ = 0;  // of the next call made alone (StoreUnderTest::pod)
};

}  // namespace
}  // namespace hilo::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  hilo::fuzz::Driver driver;
  for (int steps = 0; steps < 64 && in.remaining_bytes() > 0; ++steps) {
    driver.Step(in);
  }
  driver.CheckStored("at the end");
  return 0;
}
