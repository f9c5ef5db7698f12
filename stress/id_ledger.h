// IdLedger: every ID a process was handed, one bit per number, so that a
// repeat is caught the moment it happens and the whole set can be written
// out compactly (as runs of consecutive numbers) for a check across
// processes.
//
//   IdLedger ledger;
//   if (!ledger.Add("orders", "A", 17)) ++duplicates;
//   for (const IdLedger::Run& run : ledger.Runs()) ...
//
// Numbers are kept per (collection, node tag) in blocks of 4096 bits,
// allocated as first touched. Thread-safe; Add takes no lock while its
// thread stays in one block.
#ifndef HILO_STRESS_ID_LEDGER_H_
#define HILO_STRESS_ID_LEDGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "hilo/base/mutex.h"

namespace hilo::stress {

class IdLedger {
 public:
  // Numbers [start, start + count) of one collection and node.
  struct Run {
    std::string collection;
    std::string node_tag;
    int64_t start = 0;
    int64_t count = 0;
  };

  IdLedger();
  ~IdLedger();

  // Records `number` (>= 0). False if it was recorded before.
  bool Add(absl::string_view collection, absl::string_view node_tag,
           int64_t number);

  // Every recorded number, as maximal runs, sorted by collection, tag and
  // start. Call when no Add is running.
  std::vector<Run> Runs() const;

  static constexpr int kBlockBits = 12;
  static constexpr int64_t kBlockSize = int64_t{1} << kBlockBits;

 private:
  struct Block {
    std::atomic<uint64_t> words[kBlockSize / 64] = {};
  };
  // (collection, tag, block index)
  using Key = std::tuple<std::string, std::string, int64_t>;

  Block* BlockFor(absl::string_view collection, absl::string_view node_tag,
                  int64_t index);

  const uint64_t id_;  // tells this ledger's entries in thread caches apart
  mutable base::Mutex mu_;
  absl::flat_hash_map<Key, std::unique_ptr<Block>> blocks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_ID_LEDGER_H_
