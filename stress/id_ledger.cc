#include "stress/id_ledger.h"

#include <algorithm>

namespace hilo::stress {
namespace {

std::atomic<uint64_t> next_ledger_id{1};

// The last block each thread used, per ledger.
struct CacheEntry {
  uint64_t ledger = 0;
  std::string collection;
  std::string node_tag;
  int64_t index = -1;
  void* block = nullptr;
};
thread_local CacheEntry cache;

}  // namespace

IdLedger::IdLedger() : id_(next_ledger_id.fetch_add(1)) {}

IdLedger::~IdLedger() = default;

IdLedger::Block* IdLedger::BlockFor(absl::string_view collection,
                                    absl::string_view node_tag, int64_t index) {
  if (cache.ledger == id_ && cache.index == index &&
      cache.collection == collection && cache.node_tag == node_tag) {
    return static_cast<Block*>(cache.block);
  }
  Key key(std::string(collection), std::string(node_tag), index);
  Block* block = nullptr;
  {
    base::MutexLock lock(&mu_);
    std::unique_ptr<Block>& slot = blocks_[key];
    if (slot == nullptr) slot = std::make_unique<Block>();
    block = slot.get();
  }
  cache = CacheEntry{id_, std::string(collection), std::string(node_tag), index,
                     block};
  return block;
}

bool IdLedger::Add(absl::string_view collection, absl::string_view node_tag,
                   int64_t number) {
  Block* block = BlockFor(collection, node_tag, number >> kBlockBits);
  const int64_t bit = number & (kBlockSize - 1);
  const uint64_t mask = uint64_t{1} << (bit % 64);
  const uint64_t before =
      block->words[bit / 64].fetch_or(mask, std::memory_order_relaxed);
  return (before & mask) == 0;
}

std::vector<IdLedger::Run> IdLedger::Runs() const {
  std::vector<std::pair<Key, const Block*>> sorted;
  {
    base::MutexLock lock(&mu_);
    for (const auto& [key, block] : blocks_) {
      sorted.emplace_back(key, block.get());
    }
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Run> runs;
  for (const auto& [key, block] : sorted) {
    const auto& [collection, tag, index] = key;
    for (int64_t bit = 0; bit < kBlockSize; ++bit) {
      const uint64_t word =
          block->words[bit / 64].load(std::memory_order_relaxed);
      if (word == 0 && bit % 64 == 0) {
        bit += 63;
        continue;
      }
      if ((word >> (bit % 64) & 1) == 0) continue;
      const int64_t number = (index << kBlockBits) + bit;
      if (!runs.empty() && runs.back().collection == collection &&
          runs.back().node_tag == tag &&
          runs.back().start + runs.back().count == number) {
        ++runs.back().count;
      } else {
        runs.push_back(Run{collection, tag, number, 1});
      }
    }
  }
  return runs;
}

}  // namespace hilo::stress
