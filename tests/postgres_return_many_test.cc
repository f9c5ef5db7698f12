// ReturnRanges on PostgreSQL, as the README and the proto promise it: one
// operation whatever the number of items (one transaction, about one
// commit), and every item judged alone, in order, exactly as a ReturnRange
// of it at that point would be.
#include <cstdint>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/postgres/postgres_range_store.h"
#include "testing/postgres_instance.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::PostgresInstance;
using Outcomes = std::vector<absl::StatusOr<ReturnOutcome>>;

constexpr int kCollections = 100;
constexpr int kRangesEach = 3;
constexpr int kItems = 1000;

// A store on a schema of its own that counts the commits of batches that
// wrote something.
struct CountingStore {
  std::unique_ptr<PostgresRangeStore> store;
  std::shared_ptr<std::atomic<int>> commits =
      std::make_shared<std::atomic<int>>(0);
};

CountingStore OpenCounting() {
  CountingStore out;
  absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
  EXPECT_THAT(postgres, IsOk());
  if (!postgres.ok()) return out;
  absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
  EXPECT_THAT(uri, IsOk());
  if (!uri.ok()) return out;
  PostgresRangeStoreOptions options;
  options.uri = *uri;
  options.on_commit = [commits = out.commits](absl::Duration, int, int64_t) {
    commits->fetch_add(1);
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  EXPECT_THAT(store, IsOk());
  if (store.ok()) out.store = *std::move(store);
  return out;
}

Outcomes ReturnMany(RangeStore& store, std::vector<ReturnItem> items) {
  std::promise<absl::StatusOr<Outcomes>> promise;
  store.ReturnManyAsync(std::move(items),
                        [&](absl::StatusOr<Outcomes> outcomes) {
                          promise.set_value(std::move(outcomes));
                        });
  absl::StatusOr<Outcomes> outcomes = promise.get_future().get();
  EXPECT_THAT(outcomes, IsOk());
  return outcomes.ok() ? *std::move(outcomes) : Outcomes();
}

// What a ReturnRange of `item` alone gets: a foreign item only reads Max.
absl::StatusOr<ReturnOutcome> ReturnAlone(RangeStore& store,
                                          const ReturnItem& item) {
  if (item.foreign) {
    absl::StatusOr<std::optional<CollectionState>> row =
        store.Get(item.collection);
    if (!row.ok()) return row.status();
    return ReturnOutcome{false, row->has_value() ? (*row)->max : 0};
  }
  return store.Return(item.collection, item.end, item.last, item.token);
}

struct Issued {
  std::string collection;
  Range range;
  uint64_t token;
};

// kRangesEach ranges of different sizes in each of kCollections
// collections, with the given tokens, on every store of `stores`.
std::vector<Issued> Allocate(const std::vector<RangeStore*>& stores) {
  std::vector<Issued> issued;
  for (int c = 0; c < kCollections; ++c) {
    for (int k = 0; k < kRangesEach; ++k) {
      const std::string name = absl::StrCat("c", c);
      const uint64_t token = NextToken();
      Range range{};
      for (RangeStore* store : stores) {
        absl::StatusOr<Range> r =
            store->Allocate(name, 5 + k * 3 + c % 4, /*floor=*/0, token);
        EXPECT_THAT(r, IsOk());
        if (r.ok()) range = *r;
      }
      issued.push_back({name, range, token});
    }
  }
  return issued;
}

// Items a client could send: whole and partial returns of any issued range
// (so later items meet what earlier ones did: a previous range restored, a
// token retired), wrong tokens, returns without a token, foreign ranges,
// and arguments outside the contract.
std::vector<ReturnItem> MixedItems(const std::vector<Issued>& issued) {
  std::mt19937_64 random(20261126);
  auto pick = [&](uint64_t n) { return static_cast<int64_t>(random() % n); };
  std::vector<ReturnItem> items;
  while (items.size() < kItems) {
    const Issued& from = issued[pick(issued.size())];
    ReturnItem item;
    item.collection = from.collection;
    item.end = from.range.high;
    const int64_t size = from.range.high - from.range.low + 1;
    item.last = from.range.low - 1 + pick(size + 1);  // low-1: all of it
    item.token = from.token;
    switch (pick(10)) {
      case 0:
        item.token ^= 1;  // another range's token, or no range's
        break;
      case 1:
        item.token = 0;  // an old client's return
        break;
      case 2:
        item.foreign = true;
        break;
      case 3:
        item.last = item.end + 1;  // outside the contract
        break;
      default:
        break;
    }
    items.push_back(item);
  }
  return items;
}

TEST(PostgresReturnManyTest, AThousandItemsAreOneTransaction) {
  CountingStore s = OpenCounting();
  ASSERT_NE(s.store, nullptr);
  std::vector<Issued> issued = Allocate({s.store.get()});
  std::vector<ReturnItem> items = MixedItems(issued);

  const int before = s.commits->load();
  Outcomes outcomes = ReturnMany(*s.store, items);
  EXPECT_EQ(s.commits->load() - before, 1);
  ASSERT_EQ(outcomes.size(), items.size());
}

TEST(PostgresReturnManyTest, ItemsAreJudgedAsEachAloneWouldBeInOrder) {
  CountingStore many = OpenCounting();
  CountingStore singles = OpenCounting();
  ASSERT_NE(many.store, nullptr);
  ASSERT_NE(singles.store, nullptr);
  std::vector<Issued> issued =
      Allocate({many.store.get(), singles.store.get()});
  std::vector<ReturnItem> items = MixedItems(issued);

  Outcomes together = ReturnMany(*many.store, items);
  ASSERT_EQ(together.size(), items.size());
  int applied = 0, refused = 0, invalid = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    absl::StatusOr<ReturnOutcome> alone = ReturnAlone(*singles.store, items[i]);
    ASSERT_EQ(together[i].status().code(), alone.status().code())
        << "item " << i << ": " << together[i].status() << " vs "
        << alone.status();
    if (!alone.ok()) {
      ++invalid;
      continue;
    }
    EXPECT_EQ(together[i]->applied, alone->applied) << "item " << i;
    EXPECT_EQ(together[i]->max, alone->max) << "item " << i;
    ++(alone->applied ? applied : refused);
  }
  // The mix exercised every kind of outcome.
  EXPECT_GT(applied, 50);
  EXPECT_GT(refused, 50);
  EXPECT_GT(invalid, 50);
  for (int c = 0; c < kCollections; ++c) {
    const std::string name = absl::StrCat("c", c);
    absl::StatusOr<std::optional<CollectionState>> a = many.store->Get(name);
    absl::StatusOr<std::optional<CollectionState>> b = singles.store->Get(name);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    ASSERT_TRUE(a->has_value() && b->has_value()) << name;
    EXPECT_EQ((*a)->max, (*b)->max) << name;
    EXPECT_EQ((*a)->return_floor, (*b)->return_floor) << name;
    EXPECT_EQ((*a)->previous_return_floor, (*b)->previous_return_floor) << name;
  }
}

}  // namespace
}  // namespace hilo
