// libFuzzer target: random sequences of Allocate, Return, SetFloor, Get and
// restart (destroy and reopen) on a SqliteRangeStore over a temporary file,
// against a model of what the store must hold.
//
// The fuzzer plays one node and its clients. Every range Allocate replies
// with is "in use" by a client until a Return hands part of it back; an
// applied Return is taken to come from the range's holder, which then uses
// only the numbers up to `last`. After every step, for every collection:
//   - the ranges in use never overlap (a node's replies never do);
//   - Max never drops below the high of a range in use;
//   - the store holds exactly the model's Max and return_floor, also after a
//     restart, and every reply is the one the contract gives.
// Any violation aborts with a description, which libFuzzer reports with the
// input that led to it.
//
// Build and run: fuzz/run_fuzz.sh [seconds] [build dir].
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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/sqlite_range_store.h"

namespace hilo {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Collection names the sequences draw from (the store takes any bytes; the
// service validates names before they get here).
const char* const kCollections[] = {"orders", "a", "\xC3\x9F-\xE2\x82\xAC"};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "range_store_fuzzer: INVARIANT BROKEN: %s\n",
               what.c_str());
  std::abort();
}

// What one collection must look like.
struct Model {
  bool exists = false;
  int64_t max = 0;
  int64_t return_floor = 0;
  // Ranges in use by clients, each [low, high]: not yet handed back.
  std::vector<Range> in_use;
};

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
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
      case 1:
        Allocate(in, name, m);
        break;
      case 2:
        ReturnHeld(in, name, m);
        break;
      case 3:
        ReturnAnything(in, name, m);
        break;
      case 4:
        SetFloor(in, name, m);
        break;
      case 5:
        Restart();
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
    {
      const Model& m = models_[name];
      absl::StatusOr<std::optional<CollectionState>> row = store_->Get(name);
      if (!row.ok())
        Fail(absl::StrCat(when, ": Get: ", row.status().ToString()));
      if (row->has_value() != m.exists) {
        Fail(absl::StrFormat("%s: %s has %s row", when, name,
                             m.exists ? "lost its" : "an unexpected"));
      }
      if (m.exists &&
          ((*row)->max != m.max || (*row)->return_floor != m.return_floor)) {
        Fail(absl::StrFormat(
            "%s: %s stores max %d return_floor %d; want max %d return_floor %d",
            when, name, (*row)->max, (*row)->return_floor, m.max,
            m.return_floor));
      }
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

  void Allocate(FuzzedDataProvider& in, const std::string& name, Model& m) {
    const int64_t size = Number(in, 32);
    const int64_t floor = in.ConsumeBool() ? 0 : Number(in, m.max);
    absl::StatusOr<Range> r = store_->Allocate(name, size, floor);
    if (size < 1 || floor < 0) {
      Expect(r.status(), absl::StatusCode::kInvalidArgument, "Allocate");
      return;
    }
    const int64_t base = std::max(m.max, floor);
    if (base > kInt64Max - size) {
      Expect(r.status(), absl::StatusCode::kOutOfRange, "Allocate");
      return;
    }
    if (!r.ok()) Fail(absl::StrCat("Allocate: ", r.status().ToString()));
    if (r->low != base + 1 || r->high != base + size) {
      Fail(absl::StrFormat("Allocate(%s, %d, %d) gave %d-%d; want %d-%d", name,
                           size, floor, r->low, r->high, base + 1,
                           base + size));
    }
    m.exists = true;
    m.max = r->high;
    m.return_floor = r->low - 1;
    m.in_use.push_back(*r);
  }

  // A client hands back the unused tail of a range it holds.
  void ReturnHeld(FuzzedDataProvider& in, const std::string& name, Model& m) {
    if (m.in_use.empty()) return;
    const size_t i = in.ConsumeIntegralInRange<size_t>(0, m.in_use.size() - 1);
    const Range held = m.in_use[i];
    const int64_t last =
        in.ConsumeIntegralInRange<int64_t>(held.low - 1, held.high);
    absl::StatusOr<ReturnOutcome> out = store_->Return(name, held.high, last);
    if (!out.ok()) Fail(absl::StrCat("Return: ", out.status().ToString()));
    CheckReturn(name, m, held.high, last, *out);
  }

  // Any return at all, as a stale or buggy client might send.
  void ReturnAnything(FuzzedDataProvider& in, const std::string& name,
                      Model& m) {
    const int64_t end = in.ConsumeBool() ? m.max : Number(in, m.max);
    const int64_t last =
        in.ConsumeBool() ? Number(in, m.return_floor) : Number(in, end);
    absl::StatusOr<ReturnOutcome> out = store_->Return(name, end, last);
    if (last < 0 || last > end) {
      Expect(out.status(), absl::StatusCode::kInvalidArgument, "Return");
      return;
    }
    if (!out.ok()) Fail(absl::StrCat("Return: ", out.status().ToString()));
    CheckReturn(name, m, end, last, *out);
  }

  void CheckReturn(const std::string& name, Model& m, int64_t end, int64_t last,
                   const ReturnOutcome& out) {
    const bool applies =
        m.exists && end == m.max && last >= m.return_floor && last <= m.max;
    if (out.applied != applies) {
      Fail(absl::StrFormat(
          "Return(%s, end %d, last %d) applied=%d; want %d (max %d, "
          "return_floor %d)",
          name, end, last, out.applied, applies, m.max, m.return_floor));
    }
    const int64_t want_max = applies ? last : (m.exists ? m.max : 0);
    if (out.max != want_max) {
      Fail(absl::StrFormat("Return(%s, end %d, last %d) says max %d; want %d",
                           name, end, last, out.max, want_max));
    }
    if (!applies) return;
    // The range that ended at Max is now used only up to `last`; the
    // return came from its holder (or from no one, when nothing moved).
    bool found = last == end;
    for (size_t i = 0; i < m.in_use.size(); ++i) {
      if (m.in_use[i].high != end) continue;
      found = true;
      if (last < m.in_use[i].low) {
        m.in_use.erase(m.in_use.begin() + i);
      } else {
        m.in_use[i].high = last;
      }
      break;
    }
    if (!found) {
      Fail(absl::StrFormat(
          "Return(%s, end %d, last %d) applied, moving Max down, but no "
          "range in use ends at %d",
          name, end, last, end));
    }
    m.max = last;
    m.return_floor = last;
  }

  void SetFloor(FuzzedDataProvider& in, const std::string& name, Model& m) {
    const int64_t floor = Number(in, m.max);
    absl::StatusOr<FloorOutcome> out = store_->SetFloor(name, floor);
    if (floor < 0) {
      Expect(out.status(), absl::StatusCode::kInvalidArgument, "SetFloor");
      return;
    }
    if (!out.ok()) Fail(absl::StrCat("SetFloor: ", out.status().ToString()));
    const bool raises = !m.exists || m.max < floor;
    if (out->max != std::max(m.max, floor) || out->raised != (m.max < floor)) {
      Fail(absl::StrFormat("SetFloor(%s, %d) gave raised=%d max %d (max %d)",
                           name, floor, out->raised, out->max, m.max));
    }
    if (raises) {
      m.exists = true;
      m.max = std::max(m.max, floor);
      m.return_floor = floor;
    }
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
      std::vector<Range> sorted = m.in_use;
      std::sort(sorted.begin(), sorted.end(),
                [](const Range& a, const Range& b) { return a.low < b.low; });
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i].low < 1 || sorted[i].high < sorted[i].low) {
          Fail(absl::StrFormat("%s: range in use %d-%d is malformed", name,
                               sorted[i].low, sorted[i].high));
        }
        if (i > 0 && sorted[i].low <= sorted[i - 1].high) {
          Fail(absl::StrFormat("%s: ranges in use %d-%d and %d-%d overlap",
                               name, sorted[i - 1].low, sorted[i - 1].high,
                               sorted[i].low, sorted[i].high));
        }
        if (sorted[i].high > m.max) {
          Fail(absl::StrFormat("%s: Max %d is below %d-%d, a range in use",
                               name, m.max, sorted[i].low, sorted[i].high));
        }
      }
    }
  }

  const std::string path_;
  std::unique_ptr<SqliteRangeStore> store_;
  std::map<std::string, Model> models_;
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
