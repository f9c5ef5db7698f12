// CollectionModel: what hilo's contract says one collection of one node must
// do, and what its clients hold, written from the README ("The contract")
// and the comments of proto/hilo/v1/hilo.proto and
// service/store/range_store.h, never from the store's code. The fuzzer
// (range_store_fuzzer.cc) feeds it every call it makes and the store's
// answer; the model fails the run (Fail, fuzz_report.h) at the first answer
// the contract forbids, then follows the answer.
//
// The model has two halves that do not consult each other.
//
// THE RULES: the answers the contract pins. Quoted from the README unless
// marked (proto) or (range_store.h).
//  A1 "low = max(Max, last_max) + 1, high = low + size - 1" (the store's
//     floor argument is last_max); "A new collection gives 1-32".
//  A2 "If high would pass INT64_MAX: OUT_OF_RANGE, nothing changes."
//  A3 A size below 1, a negative floor or a token of 0 is INVALID_ARGUMENT
//     (range_store.h: "Reserves size (>= 1)", "token (!= 0)"; README: "a
//     negative number ... is INVALID_ARGUMENT").
//  R1 "Applied only if ... range_token is the token of the range this node
//     issued last and not yet retired, Max == end, and return_floor <= last
//     (return_floor is one below the low of the range last issued); then
//     Max = last. Otherwise applied=false with the current Max".
//  R2 "An applied return retires the token" and "An applied return also
//     raises return_floor to last".
//  R3 "A whole return of a range whose low was the previous range's high + 1
//     gives that previous range its token and return floor back, as if the
//     later range had never been issued". The model keeps, for each range,
//     the state just before it was issued when its low was the high of the
//     range then last issued plus one, and a whole return (last = low - 1)
//     puts that state back. Where the README does not pin the answer the
//     model allows both and keeps both as candidate states until the stored
//     return floor tells them apart: a whole return of a range that was
//     itself given back by R3 (the README speaks of a pair; "as if never
//     issued" would give back the one before it too), and a return down to a
//     floor raised into the range (range_store.h says it gives back).
//  R4 Without a token (an old client; the server's opt-in): "judged by Max
//     and the return floor alone"; then "Max = return_floor = last and the
//     tokens are retired" (range_store.h).
//  R5 "Requires 0 <= last <= end" (range_store.h); "last > end is
//     INVALID_ARGUMENT ... and changes nothing".
//  F1 "Raises a collection's Max to at least floor ... Never lowers it.
//     Whatever Max was, it also raises the return floor to at least floor"
//     (proto); the kept states of R3 too: "so no return can reach below a
//     floor". "A floor above Max retires the token of the range last issued"
//     (proto). "creating the row if needed" (range_store.h).
//  D1 Delete takes the row "only where that can never bring a number back:
//     the collection's Max and return floor are 0 ... Otherwise
//     FAILED_PRECONDITION ... and the row stays as it was; an unknown
//     collection is NOT_FOUND" (proto). A NextRange after it "starts at 1".
//  G1 Get shows Max and the return floor (proto Collection: max,
//     return_floor); the model checks both after every step.
//
// THE LEDGER: safety, whatever the rules say. Each range issued is a
// Holding: the numbers still its holder's (owned: not handed back by an
// applied return) and those its holder may still use (used: a holder stops
// using the tail it returns before it sends the return). After every
// answer:
//  S1 a range handed out holds no number another holding still owns, none
//     at or below any floor set (an import uses those), and none below 1;
//  S2 an applied return hands back only numbers its holder owned and did
//     not use, none at or below a floor; a return that no holder of that
//     token sent never applies;
//  S3 Max (every answer that carries it, and the stored row) is never below
//     a number a holding owns, nor below a floor;
//  S4 a refused return or a refused call changes nothing (the rules above
//     keep the state; the stored row is checked after every step).
//
// Not thread-safe: one fuzzer thread drives it.
#ifndef HILO_FUZZ_CONTRACT_MODEL_H_
#define HILO_FUZZ_CONTRACT_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/store/range_store.h"

namespace hilo::fuzz {

// A range a client was given (S1-S3).
struct Holding {
  Range issued;
  uint64_t token = 0;
  int64_t used_high = 0;   // the highest number its holder may still use
  int64_t owned_high = 0;  // issued.low..owned_high are still its
  bool sent_return = false;
};

class CollectionModel {
 public:
  explicit CollectionModel(std::string name);

  // The store's answer to Allocate(size, floor, token); the index of the
  // new holding when a range was given.
  std::optional<size_t> Allocate(int64_t size, int64_t floor, uint64_t token,
                                 const absl::StatusOr<Range>& got,
                                 absl::string_view call);
  // The holder of holdings()[i] stops using every number above `last`
  // because it is about to send a return down to `last`.
  void HolderReturns(size_t i, int64_t last);
  // The store's answer to Return(end, last, token). `sender` is the holding
  // whose holder sent it (required without a token: R4 is unsafe by design,
  // so only a holder of the range ending at `end` sends one), or nullopt
  // for a caller that holds nothing.
  void Return(int64_t end, int64_t last, uint64_t token,
              std::optional<size_t> sender,
              const absl::StatusOr<ReturnOutcome>& got, absl::string_view call);
  void SetFloor(int64_t floor, const absl::StatusOr<FloorOutcome>& got,
                absl::string_view call);
  void Delete(const absl::StatusOr<CollectionState>& got,
              absl::string_view call);
  // The stored row (G1, S3); also settles which candidate state (R3) the
  // store is in.
  void CheckStored(const absl::StatusOr<std::optional<CollectionState>>& row,
                   absl::string_view when);

  const std::vector<Holding>& holdings() const { return holdings_; }
  // Max, as every candidate agrees (R1-R4 leave Max pinned).
  int64_t max() const { return candidates_.front().max; }
  // The lowest return floor of any candidate.
  int64_t return_floor() const;
  // Whether `token` may be live in some candidate: a caller that holds
  // nothing never sends such a token.
  bool MayBeLive(uint64_t token) const;
  // The token of the range last issued while live in every candidate, else 0.
  uint64_t LiveToken() const;

 private:
  // The state just before a range was issued (R3).
  struct Before {
    int last = -1;
    bool live = false;
    int64_t return_floor = 0;
    friend bool operator==(const Before&, const Before&) = default;
  };
  // One state the contract allows the collection to be in.
  struct State {
    bool exists = false;
    int64_t max = 0;
    int64_t return_floor = 0;
    int last = -1;          // index into holdings_ of the range issued last
    bool live = false;      // its token is not retired
    bool restored = false;  // R3 made it the last again
    std::map<int, Before> before;  // by holding index
    friend bool operator==(const State&, const State&) = default;
  };
  struct ReturnNext {
    bool applied;
    State state;
  };
  std::vector<ReturnNext> ReturnRule(const State& s, int64_t end, int64_t last,
                                     uint64_t token) const;
  void CheckMax(int64_t max, absl::string_view what) const;
  void CheckHandBack(const Holding& h, int64_t end, int64_t last,
                     absl::string_view call) const;
  std::string Describe() const;

  std::string name_;
  std::vector<State> candidates_;  // never empty
  std::vector<Holding> holdings_;
  int64_t floor_high_ = 0;  // the highest floor ever set (S1-S3)
};

}  // namespace hilo::fuzz

#endif  // HILO_FUZZ_CONTRACT_MODEL_H_
