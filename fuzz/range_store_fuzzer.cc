// libFuzzer target: random sequences of Allocate, Return, SetFloor, Delete,
// Get and restart (destroy and reopen) on a SqliteRangeStore over a
// temporary file, against a model of what the store must hold.
//
// The model is written from the contract (service/store/range_store.h and the
// ReturnRange / SetFloor / DeleteCollection comments of
// proto/hilo/v1/hilo.proto), not from the store's code. Per collection it keeps
// Max, the return floor, the token of the range last issued (0 once retired)
// and, when that range was issued right above the one before it, that range's
// token and return floor. The fuzzer plays one node and its clients:
//   - Allocate: a client takes a range with a token the harness makes up
//     (distinct, never 0); it holds every number of it (a lease).
//   - A holder hands back the tail of one of its ranges with its token; from
//     then on it uses only the numbers up to `last` (a client retires a
//     range before returning it), whatever the reply.
//   - A client holding two adjacent ranges returns the later one whole, then
//     the tail of the earlier one (the earlier token must come back).
//   - The network repeats a return a holder sent earlier (a retry, a
//     duplicate, a late copy after the numbers were issued again).
//   - A caller that holds nothing sends a return with a wrong token: a
//     guess (1, a power of two, the token +1 or ^1), any 64 bits, or the
//     token of an earlier range; never the live one.
//   - A return without a token (legacy rule), taken to come from the holder
//     of the range it names.
//   - SetFloor at, below and above Max, as an import of data whose IDs go
//     up to the floor would; restarts.
//   - Delete, now and then after the holders returned every range whole:
//     it takes the row only when the row is exactly like no row (Max and
//     return floor 0, no token that can come back), is FAILED_PRECONDITION
//     otherwise and NOT_FOUND without a row; either refusal changes
//     nothing. Leases and sent returns outlive the row: a late copy of a
//     return must not apply to the collection started over.
// Every reply must be exactly the model's (range, applied, max, raised,
// status code), and after every step:
//   - no two leases hold a number in common, and no range given after a
//     SetFloor holds a number at or below that floor (the import's): no
//     number is handed out twice;
//   - Max is never below a number a lease holds, nor below a floor;
//   - the store holds exactly the model's Max, return floor and token, and
//     the previous range's token and floor while they can still come back,
//     also after a restart.
// Any violation aborts with a description, which libFuzzer reports with the
// input that led to it.
//
// Build and run: fuzz/run_fuzz.sh [seconds] [build dir].
//
// Built with HILO_FUZZ_TRACE defined (the main build's fuzz_seed_replay,
// fuzz/seed_replay.cmake), every step also writes one line to stdout: the
// operation and collection, then each store call with the parameters it
// decoded. The seed test compares that against fuzz/seed_traces/, so a
// change to how inputs decode names the seeds it would reinterpret.
#include <fuzzer/FuzzedDataProvider.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/range_token.h"
#include "service/store/sqlite/sqlite_range_store.h"

namespace hilo {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

#ifdef HILO_FUZZ_TRACE
constexpr bool kTrace = true;
#else
constexpr bool kTrace = false;
#endif

// One line of the operation trace (see the top of this file), its bytes
// outside printable ASCII escaped; builds nothing unless tracing.
template <typename... Parts>
void Trace(const Parts&... parts) {
  if constexpr (kTrace) {
    std::printf("%s\n", absl::CHexEscape(absl::StrCat(parts...)).c_str());
  }
}

// Collection names the sequences draw from (the store takes any bytes; the
// service validates names before they get here).
const char* const kCollections[] = {"orders", "a", "\xC3\x9F-\xE2\x82\xAC"};

[[noreturn]] void Fail(const std::string& what) {
  std::fflush(stdout);  // the trace so far, when there is one
  std::fprintf(stderr, "range_store_fuzzer: INVARIANT BROKEN: %s\n",
               what.c_str());
  std::abort();
}

// A range a client was given, and what of it the client may still use.
struct Lease {
  Range issued;
  uint64_t token = 0;
  // The highest number its holder may use: issued.high until it sends a
  // return, then that return's `last` (below issued.low: nothing).
  int64_t held_high = 0;
  bool returned = false;  // its holder sent its return
};

// A return a holder sent, which the network may deliver again.
struct SentReturn {
  int64_t end = 0;
  int64_t last = 0;
  uint64_t token = 0;
};

// What one collection must look like, by the contract.
struct Model {
  bool exists = false;
  int64_t max = 0;
  int64_t return_floor = 0;
  uint64_t token = 0;  // of the range last issued; 0 once retired
  // The range issued just before the last one, if the last one starts right
  // above it and that one's token was still live then; else 0 and 0.
  uint64_t previous_token = 0;
  int64_t previous_return_floor = 0;
  // The highest floor set: an import uses the numbers up to it, so no range
  // given from then on may include one of them. (Ranges already out when
  // the floor was set keep their numbers: the operator's to avoid.)
  int64_t import_high = 0;
  std::vector<Lease> leases;
  std::vector<SentReturn> sent;
};

std::string Describe(const Model& m) {
  return absl::StrFormat(
      "max %d return_floor %d token %#x previous_token %#x "
      "previous_return_floor %d",
      m.max, m.return_floor, m.token, m.previous_token,
      m.previous_return_floor);
}

class Harness {
 public:
  explicit Harness(std::string path) : path_(std::move(path)) {
    RemoveFiles();
    Open();
  }
  ~Harness() {
    store_.reset();
    RemoveFiles();
  }

  void Step(FuzzedDataProvider& in) {
    const std::string name = kCollections[in.ConsumeIntegralInRange<size_t>(
        0, std::size(kCollections) - 1)];
    Model& m = models_[name];
    // The seeds in fuzz/corpus/ hold each operation's number itself in its
    // byte, which any pick of 0..N (N >= 10) reads the same: a new operation
    // takes the next number and they keep their meaning. Renumbering, or
    // changing what an operation consumes, makes them replay other
    // operations than the ones they were saved for; the seed test
    // (fuzz/seed_replay.cmake) then fails naming them, and they must be
    // re-derived to replay their traces in fuzz/seed_traces/ again.
    static constexpr const char* kOps[12] = {
        "Allocate",     "Allocate", "ReturnHeld",       "ReturnHeld",
        "AdjacentPair", "Replay",   "ReturnWrongToken", "ReturnAnything",
        "SetFloor",     "SetFloor", "Restart",          "Delete"};
    const int op = in.ConsumeIntegralInRange<int>(0, 11);
    Trace(kOps[op], " on ", name);
    switch (op) {
      case 0:
      case 1:
        AllocateAny(in, name, m);
        break;
      case 2:
      case 3:
        ReturnHeld(in, name, m);
        break;
      case 4:
        AdjacentPair(in, name, m);
        break;
      case 5:
        Replay(in, name, m);
        break;
      case 6:
        ReturnWrongToken(in, name, m);
        break;
      case 7:
        ReturnAnything(in, name, m);
        break;
      case 8:
      case 9:
        SetFloor(in, name, m);
        break;
      case 10:
        Restart();
        break;
      case 11:
        Delete(in, name, m);
        break;
    }
    CheckInvariants();
    CheckStored(name, "after a step");
  }

  // The store's rows against the model, for every collection.
  void CheckStored(absl::string_view when) {
    for (const char* name : kCollections) CheckStored(name, when);
  }

  void CheckStored(const std::string& name, absl::string_view when) {
    const Model& m = models_[name];
    absl::StatusOr<std::optional<CollectionState>> row = store_->Get(name);
    if (!row.ok()) Fail(absl::StrCat(when, ": Get: ", row.status().ToString()));
    if (row->has_value() != m.exists) {
      Fail(absl::StrFormat("%s: %s has %s row", when, name,
                           m.exists ? "lost its" : "an unexpected"));
    }
    if (!m.exists) return;
    const CollectionState& s = **row;
    // The previous range can come back only while the last one's token is
    // live; after that its fields are of no consequence.
    const bool previous_matters = m.token != 0;
    if (s.max != m.max || s.return_floor != m.return_floor ||
        s.range_token != RangeTokenDigest(m.token) ||
        (previous_matters &&
         s.previous_token != RangeTokenDigest(m.previous_token)) ||
        (previous_matters && m.previous_token != 0 &&
         s.previous_return_floor != m.previous_return_floor)) {
      Fail(absl::StrFormat(
          "%s: %s stores max %d return_floor %d token %#x previous_token %#x "
          "previous_return_floor %d; want %s",
          when, name, s.max, s.return_floor, s.range_token, s.previous_token,
          s.previous_return_floor, Describe(m)));
    }
  }

 private:
  void Open() {
    SqliteRangeStoreOptions options;
    options.path = path_;
    // A clean close (the only kind here) loses nothing in either mode.
    options.sync = SyncMode::kNormal;
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(options);
    if (!store.ok()) Fail(absl::StrCat("Open: ", store.status().ToString()));
    store_ = *std::move(store);
  }

  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      unlink((path_ + suffix).c_str());
    }
  }

  void Restart() {
    store_.reset();
    Open();
    CheckStored("after a restart");
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

  void AllocateAny(FuzzedDataProvider& in, const std::string& name, Model& m) {
    const int64_t size = Number(in, 32);
    const int64_t floor = in.ConsumeBool() ? 0 : Number(in, m.max);
    // Now and then a token the contract forbids.
    const uint64_t token =
        in.ConsumeIntegralInRange<int>(0, 15) == 0 ? 0 : NewToken();
    Allocate(name, m, size, floor, token);
  }

  // Allocate, checked against the model; the index of the new lease, if
  // one was given.
  std::optional<size_t> Allocate(const std::string& name, Model& m,
                                 int64_t size, int64_t floor, uint64_t token) {
    absl::StatusOr<Range> r = store_->Allocate(name, size, floor, token);
    const std::string call = absl::StrFormat(
        "Allocate(%s, size %d, floor %d, token %#x)", name, size, floor, token);
    Trace("  ", call);
    if (size < 1 || floor < 0 || token == 0) {
      Expect(r.status(), absl::StatusCode::kInvalidArgument, call);
      return std::nullopt;
    }
    const int64_t base = std::max(m.max, floor);
    if (base > kInt64Max - size) {
      Expect(r.status(), absl::StatusCode::kOutOfRange, call);
      return std::nullopt;
    }
    if (!r.ok()) Fail(absl::StrCat(call, ": ", r.status().ToString()));
    const Range want{base + 1, base + size};
    if (!(*r == want)) {
      Fail(absl::StrFormat("%s gave %d-%d; want %d-%d (%s)", call, r->low,
                           r->high, want.low, want.high, Describe(m)));
    }
    for (const Lease& l : m.leases) {
      if (l.held_high >= l.issued.low && r->low <= l.held_high &&
          l.issued.low <= r->high) {
        Fail(absl::StrFormat(
            "%s gave %d-%d, handing out again numbers %d-%d still holds "
            "(up to %d)",
            call, r->low, r->high, l.issued.low, l.issued.high, l.held_high));
      }
    }
    if (r->low <= m.import_high) {
      Fail(absl::StrFormat(
          "%s gave %d-%d, handing out again numbers at or below the floor "
          "%d, which an import uses",
          call, r->low, r->high, m.import_high));
    }
    // Right above the last range: that one becomes the previous range.
    if (base == m.max) {
      m.previous_token = m.token;
      m.previous_return_floor = m.return_floor;
    } else {
      m.previous_token = 0;
      m.previous_return_floor = 0;
    }
    m.exists = true;
    m.max = r->high;
    m.return_floor = r->low - 1;
    m.token = token;
    m.leases.push_back(Lease{*r, token, r->high, false});
    return m.leases.size() - 1;
  }

  // A holder hands back the unused tail of one of its ranges, the range
  // last issued more often than not.
  void ReturnHeld(FuzzedDataProvider& in, const std::string& name, Model& m) {
    std::vector<size_t> held;
    for (size_t i = 0; i < m.leases.size(); ++i) {
      if (!m.leases[i].returned) held.push_back(i);
    }
    if (held.empty()) return;
    const size_t i =
        in.ConsumeBool()
            ? held.back()
            : held[in.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
    const Lease& l = m.leases[i];
    ReturnAsHolder(
        name, m, i,
        in.ConsumeIntegralInRange<int64_t>(l.issued.low - 1, l.held_high));
  }

  // The holder of lease `i` returns (last, high] with its token.
  void ReturnAsHolder(const std::string& name, Model& m, size_t i,
                      int64_t last) {
    Lease& l = m.leases[i];
    // The client stops using the tail before the request leaves.
    l.returned = true;
    l.held_high = std::min(l.held_high, last);
    const SentReturn sent{l.issued.high, last, l.token};
    m.sent.push_back(sent);
    Return(name, m, sent.end, sent.last, sent.token, "a holder's");
  }

  // A client that fetched ahead holds two adjacent ranges; it returns the
  // later one whole, then the unused tail of the earlier one. Max must end
  // at the last number it used.
  void AdjacentPair(FuzzedDataProvider& in, const std::string& name, Model& m) {
    std::optional<size_t> first = Allocate(
        name, m, in.ConsumeIntegralInRange<int64_t>(1, 64), 0, NewToken());
    if (!first.has_value()) return;
    CheckInvariants();
    CheckStored(name, "after the first range of a pair");
    std::optional<size_t> second = Allocate(
        name, m, in.ConsumeIntegralInRange<int64_t>(1, 64), 0, NewToken());
    if (!second.has_value()) return;
    CheckInvariants();
    CheckStored(name, "after the second range of a pair");
    ReturnAsHolder(name, m, *second, m.leases[*second].issued.low - 1);
    CheckInvariants();
    CheckStored(name, "after the whole return of the second range of a pair");
    const Range earlier = m.leases[*first].issued;
    const int64_t last =
        in.ConsumeIntegralInRange<int64_t>(earlier.low - 1, earlier.high);
    ReturnAsHolder(name, m, *first, last);
    if (m.max != last) {
      Fail(absl::StrFormat(
          "%s: a client returned %d-%d whole and then %d-%d down to %d; Max "
          "is %d, not %d",
          name, m.leases[*second].issued.low, m.leases[*second].issued.high,
          earlier.low, earlier.high, last, m.max, last));
    }
  }

  // The network delivers again a return a holder sent before: a retry, a
  // duplicate, or a copy that arrives late.
  void Replay(FuzzedDataProvider& in, const std::string& name, Model& m) {
    if (m.sent.empty()) return;
    const SentReturn sent =
        in.ConsumeBool()
            ? m.sent.back()
            : m.sent[in.ConsumeIntegralInRange<size_t>(0, m.sent.size() - 1)];
    Return(name, m, sent.end, sent.last, sent.token, "a repeated");
  }

  // A caller that holds nothing tries a token: never the live one.
  void ReturnWrongToken(FuzzedDataProvider& in, const std::string& name,
                        Model& m) {
    const uint64_t live = m.token;
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
        // An earlier range's token (the previous one's, too).
        if (!m.leases.empty()) {
          token = m.leases[in.ConsumeIntegralInRange<size_t>(
                               0, m.leases.size() - 1)]
                      .token;
        }
        break;
      default:
        token = in.ConsumeIntegral<uint64_t>();
        break;
    }
    while (token == live || token == 0) token += 2;
    const int64_t end = in.ConsumeBool() ? m.max : Number(in, m.max);
    const int64_t last =
        in.ConsumeBool() ? Number(in, m.return_floor) : Number(in, end);
    Return(name, m, end, last, token, "a wrong token's");
  }

  // Any return at all, as a buggy holder (with the live token) or a client
  // older than tokens (without one) might send.
  void ReturnAnything(FuzzedDataProvider& in, const std::string& name,
                      Model& m) {
    const int64_t end = in.ConsumeBool() ? m.max : Number(in, m.max);
    const int64_t last =
        in.ConsumeBool() ? Number(in, m.return_floor) : Number(in, end);
    const uint64_t token = in.ConsumeBool() ? 0 : m.token;
    if (token != 0) {
      // Only the live range's holder knows its token.
      for (Lease& l : m.leases) {
        if (l.token == token && last >= 0 && last <= end) {
          l.returned = true;
          l.held_high = std::min(l.held_high, last);
        }
      }
    }
    Return(name, m, end, last, token, token == 0 ? "a tokenless" : "a buggy");
  }

  // Return, checked against the model, which it then follows.
  void Return(const std::string& name, Model& m, int64_t end, int64_t last,
              uint64_t token, absl::string_view who) {
    absl::StatusOr<ReturnOutcome> out = store_->Return(name, end, last, token);
    const std::string call =
        absl::StrFormat("%s Return(%s, end %d, last %d, token %#x)", who, name,
                        end, last, token);
    Trace("  ", call);
    if (last < 0 || last > end) {
      Expect(out.status(), absl::StatusCode::kInvalidArgument, call);
      return;
    }
    if (!out.ok()) Fail(absl::StrCat(call, ": ", out.status().ToString()));
    const bool applies = m.exists && end == m.max && last >= m.return_floor &&
                         (token == 0 || token == m.token);
    const int64_t want_max = applies ? last : m.max;
    if (out->applied != applies || out->max != want_max) {
      Fail(absl::StrFormat(
          "%s gave applied=%d max %d; want applied=%d max %d "
          "(%s)",
          call, out->applied, out->max, applies, want_max, Describe(m)));
    }
    if (!applies) return;
    if (token == 0) {
      // The legacy rule, taken to come from the holder of the range ending
      // at `end`: Max and the floor go to `last`, every token is retired.
      for (Lease& l : m.leases) {
        if (l.issued.high == end && l.held_high > last) {
          l.returned = true;
          l.held_high = last;
          break;
        }
      }
      m.return_floor = last;
      m.token = 0;
      m.previous_token = 0;
      m.previous_return_floor = 0;
    } else if (last == m.return_floor && m.previous_token != 0) {
      // The whole range came back: the one before it is the last again.
      m.return_floor = m.previous_return_floor;
      m.token = m.previous_token;
      m.previous_token = 0;
      m.previous_return_floor = 0;
    } else {
      m.return_floor = last;
      m.token = 0;
      m.previous_token = 0;
      m.previous_return_floor = 0;
    }
    m.max = last;
  }

  void SetFloor(FuzzedDataProvider& in, const std::string& name, Model& m) {
    // At or below Max as often as above it.
    int64_t floor = 0;
    if (in.ConsumeBool() && m.max > 0) {
      floor = in.ConsumeIntegralInRange<int64_t>(0, m.max);
    } else {
      floor = Number(in, m.max);
    }
    absl::StatusOr<FloorOutcome> out = store_->SetFloor(name, floor);
    const std::string call = absl::StrFormat("SetFloor(%s, %d)", name, floor);
    Trace("  ", call);
    if (floor < 0) {
      Expect(out.status(), absl::StatusCode::kInvalidArgument, call);
      return;
    }
    if (!out.ok()) Fail(absl::StrCat(call, ": ", out.status().ToString()));
    const bool raises = floor > m.max;
    if (out->raised != raises || out->max != std::max(m.max, floor)) {
      Fail(
          absl::StrFormat("%s gave raised=%d max %d; want raised=%d max %d "
                          "(%s)",
                          call, out->raised, out->max, raises,
                          std::max(m.max, floor), Describe(m)));
    }
    m.exists = true;
    m.import_high = std::max(m.import_high, floor);
    if (raises) {
      m.max = floor;
      m.token = 0;
      m.previous_token = 0;
      m.previous_return_floor = 0;
    }
    // Whatever Max was: no return may reach below the floor.
    m.return_floor = std::max(m.return_floor, floor);
    if (m.previous_token != 0) {
      m.previous_return_floor = std::max(m.previous_return_floor, floor);
    }
  }

  // Delete, checked against the model; half the time the holders first
  // return every range they hold whole, newest first, which by the
  // contract brings a collection of only those ranges back to Max 0.
  void Delete(FuzzedDataProvider& in, const std::string& name, Model& m) {
    if (in.ConsumeBool()) {
      for (size_t i = m.leases.size(); i-- > 0;) {
        if (m.leases[i].returned) continue;
        ReturnAsHolder(name, m, i, m.leases[i].issued.low - 1);
        CheckInvariants();
      }
    }
    absl::StatusOr<CollectionState> out = store_->Delete(name);
    const std::string call = absl::StrFormat("Delete(%s) of %s", name,
                                             m.exists ? Describe(m) : "no row");
    Trace("  ", call);
    if (!m.exists) {
      Expect(out.status(), absl::StatusCode::kNotFound, call);
      return;
    }
    const bool like_no_row = m.max == 0 && m.return_floor == 0 &&
                             m.token == 0 && m.previous_token == 0;
    if (!like_no_row) {
      Expect(out.status(), absl::StatusCode::kFailedPrecondition, call);
      return;
    }
    if (!out.ok()) Fail(absl::StrCat(call, ": ", out.status().ToString()));
    if (out->max != 0 || out->return_floor != 0 || out->range_token != 0) {
      Fail(absl::StrFormat(
          "%s gave a deleted row of max %d return_floor %d token %#x", call,
          out->max, out->return_floor, out->range_token));
    }
    m.exists = false;
  }

  void Expect(const absl::Status& status, absl::StatusCode code,
              absl::string_view what) {
    if (status.code() != code) {
      Fail(absl::StrCat(what, ": got ", status.ToString(), "; want ",
                        absl::StatusCodeToString(code)));
    }
  }

  void CheckInvariants() {
    for (auto& [name, m] : models_) {
      std::vector<const Lease*> held;
      for (const Lease& l : m.leases) {
        if (l.held_high >= l.issued.low) held.push_back(&l);
      }
      std::sort(held.begin(), held.end(), [](const Lease* a, const Lease* b) {
        return a->issued.low < b->issued.low;
      });
      for (size_t i = 0; i < held.size(); ++i) {
        const Lease& l = *held[i];
        if (l.issued.low < 1 || l.issued.high < l.issued.low) {
          Fail(absl::StrFormat("%s: range %d-%d is malformed", name,
                               l.issued.low, l.issued.high));
        }
        if (i > 0 && l.issued.low <= held[i - 1]->held_high) {
          Fail(absl::StrFormat(
              "%s: numbers handed out twice: %d-%d (held to %d) and %d-%d "
              "(held to %d)",
              name, held[i - 1]->issued.low, held[i - 1]->issued.high,
              held[i - 1]->held_high, l.issued.low, l.issued.high,
              l.held_high));
        }
        if (l.held_high > m.max) {
          Fail(absl::StrFormat("%s: Max %d is below %d, held from %d-%d", name,
                               m.max, l.held_high, l.issued.low,
                               l.issued.high));
        }
      }
      if (m.max < m.import_high) {
        Fail(absl::StrFormat("%s: Max %d is below the floor %d", name, m.max,
                             m.import_high));
      }
    }
  }

  const std::string path_;
  std::unique_ptr<SqliteRangeStore> store_;
  std::map<std::string, Model> models_;
  uint64_t tokens_made_ = 0;
};

// One scratch directory per fuzzing process, removed at exit: under
// $HILO_FUZZ_DIR if set, else in /dev/shm when there is one (no disk flushes,
// many more inputs a second), else under $TMPDIR or /tmp.
const std::string& ScratchDir() {
  static const std::string* const dir = [] {
    std::string base = "/tmp";
    if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
      base = tmp;
    }
    if (access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    if (const char* d = getenv("HILO_FUZZ_DIR"); d != nullptr && *d != '\0') {
      base = d;
    }
    std::string pattern = absl::StrCat(base, "/hilo-fuzz-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) Fail("mkdtemp failed");
    auto* path = new std::string(pattern);
    atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return path;
  }();
  return *dir;
}

}  // namespace
}  // namespace hilo

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  hilo::Harness harness(hilo::ScratchDir() + "/store.db");
  for (int steps = 0; steps < 64 && in.remaining_bytes() > 0; ++steps) {
    harness.Step(in);
  }
  harness.CheckStored("at the end");
  return 0;
}
