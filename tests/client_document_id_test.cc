// The text of the C++ client's document IDs (README: "collection", the
// separator, the number, "-", the tag of the node that issued the number's
// range), made by every call that makes one: Client::NextDocumentId,
// CollectionHandle::NextDocumentId and CollectionHandle::AppendDocumentId.
// Ranges come from in-process nodes (the real service over the real SQLite
// store), several of them with different tags, so ranges move from node to
// node as they would on failover.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/document_id.h"
#include "client_cpp/src/grpc_range_source.h"
#include "client_cpp/src/range_source.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/client.h"
#include "service/rpc/hilo_service.h"
#include "service/store/range_size_policy.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/fake_node.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::internal::DocumentIdFormat;
using ::hilo::internal::IdSuffix;
using ::hilo::internal::IssuedRange;
using ::hilo::internal::PreviousRange;
using ::hilo::internal::ReturnResult;
using ::hilo::testing_util::FakeNode;
using ::hilo::testing_util::IsOk;

// A RangeSource over Nodes: the i-th range asked for comes from node
// i % nodes, so each range has another node's tag than the one before;
// each return goes to the node that issued the range. Keeps every range
// issued, in order. Thread-safe.
class NodesSource final : public internal::RangeSource {
 public:
  NodesSource(const std::vector<std::string>& tags, int64_t size) {
    for (const std::string& tag : tags) {
      nodes_.push_back(std::make_unique<FakeNode>(tag, size));
    }
  }

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t index = issued_.size() % nodes_.size();
    hilo::v1::NextRangeResponse response;
    if (absl::Status s = nodes_[index]->service().DoNextRange(
            internal::MakeNextRangeRequest(collection, previous), &response);
        !s.ok()) {
      return s;
    }
    issued_.push_back(internal::ToIssuedRange(response, index));
    return issued_.back();
  }

  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override {
    std::lock_guard<std::mutex> lock(mu_);
    hilo::v1::ReturnRangeRequest request;
    request.set_collection(std::string(collection));
    request.set_end(range.high);
    request.set_last(last);
    request.set_node_tag(range.node_tag);
    request.set_range_token(range.token);
    hilo::v1::ReturnRangeResponse response;
    if (absl::Status s =
            nodes_[range.source]->service().DoReturnRange(request, &response);
        !s.ok()) {
      return s;
    }
    return ReturnResult{response.applied(), response.max()};
  }

  std::string Describe() const override { return "in-process nodes"; }

  std::vector<IssuedRange> issued() {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<FakeNode>> nodes_;  // set once
  std::vector<IssuedRange> issued_;
};

struct TestClient {
  NodesSource* source;
  std::unique_ptr<Client> client;
};

// A client of nodes with `tags`; prefetch, if on, runs at once on the
// thread that asks for it.
TestClient MakeClient(std::vector<std::string> tags, int64_t size,
                      char separator = '/', double prefetch_at = 0) {
  auto source = std::make_unique<NodesSource>(tags, size);
  NodesSource* raw = source.get();
  ClientOptions options;
  options.separator = separator;
  options.prefetch_at = prefetch_at;
  options.log = [](absl::string_view line) {
    ADD_FAILURE() << "client logged: " << line;
  };
  return {raw, NewClientForTesting(std::move(options), std::move(source),
                                   [](std::function<void()> task) { task(); })};
}

// The three calls that make a document ID, each as a function of the
// client and collection.
struct Way {
  const char* name;
  std::function<absl::StatusOr<std::string>(Client&, const std::string&)> next;
};
const Way kWays[] = {
    {"Client::NextDocumentId",
     [](Client& client, const std::string& collection) {
       return client.NextDocumentId(collection);
     }},
    {"CollectionHandle::NextDocumentId",
     [](Client& client, const std::string& collection) {
       return client.Collection(collection).NextDocumentId();
     }},
    {"CollectionHandle::AppendDocumentId",
     [](Client& client,
        const std::string& collection) -> absl::StatusOr<std::string> {
       // Appended behind text already there, which must stay.
       std::string out = "kept:";
       if (absl::Status s =
               client.Collection(collection).AppendDocumentId(&out);
           !s.ok()) {
         return s;
       }
       if (out.compare(0, 5, "kept:") != 0) {
         return absl::InternalError(absl::StrCat("text before lost: ", out));
       }
       return out.substr(5);
     }},
};

// The IDs a client must hand out, in order, if it uses every number of the
// `ranges` in turn: each number with the tag of its own range.
std::vector<std::string> IdsOf(const std::vector<IssuedRange>& ranges,
                               absl::string_view collection, char separator) {
  std::vector<std::string> ids;
  for (const IssuedRange& range : ranges) {
    for (int64_t n = range.low; n <= range.high; ++n) {
      ids.push_back(absl::StrCat(collection, absl::string_view(&separator, 1),
                                 n, "-", range.node_tag));
    }
  }
  return ids;
}

TEST(DocumentIdTest, AnIdAfterTheRangeMovedToAnotherNodeCarriesItsTag) {
  for (const double prefetch_at : {0.0, 0.5}) {
    for (const Way& way : kWays) {
      SCOPED_TRACE(absl::StrCat(way.name, ", prefetch_at ", prefetch_at));
      // Tags of every length; ranges of 3, so a tag lasts three IDs.
      TestClient t =
          MakeClient({"A", "B7", "C23", "ZZ99"}, 3, '/', prefetch_at);
      std::vector<std::string> got;
      for (int i = 0; i < 30; ++i) {
        absl::StatusOr<std::string> id = way.next(*t.client, "orders");
        ASSERT_THAT(id, IsOk());
        got.push_back(*id);
      }
      std::vector<std::string> want = IdsOf(t.source->issued(), "orders", '/');
      ASSERT_GE(want.size(), got.size());
      want.resize(got.size());
      EXPECT_EQ(got, want);
      // Ten ranges from four nodes, so nine changes of tag; each node
      // starts above the client's last number (its last_max).
      EXPECT_EQ(got[2], "orders/3-A");
      EXPECT_EQ(got[3], "orders/4-B7");
      EXPECT_EQ(got[6], "orders/7-C23");
      EXPECT_EQ(got[9], "orders/10-ZZ99");
      EXPECT_EQ(got[12], "orders/13-A");
    }
  }
}

// Every separator the client accepts stands between the collection and the
// number, whatever the collection's length; and a collection name is
// written whole, up to the 256 bytes a node accepts.
TEST(DocumentIdTest, CollectionsOfEveryLengthWithEverySeparator) {
  const size_t kLengths[] = {1,  2,  6,  7,  8,  15,  16,
                             17, 31, 32, 33, 64, 255, 256};
  for (const char separator : {'/', ':', '.', '_', 'x', ' ', '#', '\xff'}) {
    TestClient t = MakeClient({"Q1"}, 1000, separator);
    for (const size_t length : kLengths) {
      std::string collection;
      for (size_t i = 0; i < length; ++i) {
        collection += static_cast<char>('a' + (i * 7 + length) % 26);
      }
      for (const Way& way : kWays) {
        SCOPED_TRACE(absl::StrCat(way.name, ", separator '",
                                  absl::string_view(&separator, 1),
                                  "', length ", length));
        absl::StatusOr<std::string> id = way.next(*t.client, collection);
        ASSERT_THAT(id, IsOk());
        // The three ways share the collection's range: 1, 2, 3.
        const int64_t number = &way - kWays + 1;
        EXPECT_EQ(*id,
                  absl::StrCat(collection, absl::string_view(&separator, 1),
                               number, "-Q1"));
        EXPECT_EQ(id->size(), length + 1 + 1 + 3);
      }
    }
  }
}

// Many threads on one collection, ranges of 7 from three nodes in turn: no
// ID twice, and each number with the tag of a range that holds it.
TEST(DocumentIdTest, ThreadsGetUniqueIdsEachWithItsRangesTag) {
  constexpr int kThreads = 4;
  constexpr int kIdsPerThread = 700;
  TestClient t = MakeClient({"A", "B", "CD"}, 7, ':', 0.2);
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const Way& way = kWays[i % 3];
      for (int j = 0; j < kIdsPerThread; ++j) {
        absl::StatusOr<std::string> id = way.next(*t.client, "o");
        if (!id.ok()) {
          ADD_FAILURE() << id.status();
          return;
        }
        ids[i].push_back(*std::move(id));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<std::string> unique;
  const std::vector<IssuedRange> issued = t.source->issued();
  for (const std::vector<std::string>& of_thread : ids) {
    ASSERT_EQ(of_thread.size(), size_t{kIdsPerThread});
    for (const std::string& id : of_thread) {
      EXPECT_TRUE(unique.insert(id).second) << id << " handed out twice";
      // "o:<number>-<tag>"
      ASSERT_EQ(id.compare(0, 2, "o:"), 0) << id;
      const size_t dash = id.rfind('-');
      ASSERT_NE(dash, std::string::npos) << id;
      int64_t number = 0;
      ASSERT_TRUE(absl::SimpleAtoi(id.substr(2, dash - 2), &number)) << id;
      const std::string tag = id.substr(dash + 1);
      const bool in_a_range_of_its_tag =
          std::any_of(issued.begin(), issued.end(), [&](const IssuedRange& r) {
            return r.node_tag == tag && r.low <= number && number <= r.high;
          });
      EXPECT_TRUE(in_a_range_of_its_tag) << id;
    }
  }
  EXPECT_EQ(unique.size(), size_t{kThreads * kIdsPerThread});
}

// The pieces themselves: a suffix of every tag length, IDs shorter and
// longer than the word the suffix is stored in, and numbers no range holds
// (the format writes any int64 right, sign included).
TEST(DocumentIdFormatTest, WritesEveryPieceWhole) {
  const DocumentIdFormat a("a", '/');
  for (const absl::string_view tag : {"A", "AB", "ABC", "ABCD"}) {
    const IdSuffix suffix(tag);
    EXPECT_EQ(suffix.size(), 1 + tag.size());
    EXPECT_EQ(suffix.text(), absl::StrCat("-", tag));
    EXPECT_EQ(suffix.tag(), tag);
    for (const int64_t n :
         {int64_t{0}, int64_t{1}, int64_t{9}, int64_t{10}, int64_t{12345678},
          int64_t{INT64_MAX}, int64_t{-1}, int64_t{INT64_MIN}}) {
      const std::string want = absl::StrCat("a/", n, "-", tag);
      EXPECT_EQ(a.Make(n, suffix), want);
      std::string out = "x";
      a.Append(n, suffix, &out);
      EXPECT_EQ(out, absl::StrCat("x", want));
    }
  }
  EXPECT_EQ(IdSuffix().text(), "");
  EXPECT_EQ(DocumentIdFormat("c", ':').Make(7, IdSuffix()), "c:7");
}

// A tag longer than a node may send never ends an ID cut short: "ABCDE" and
// "ABCDX" cut to "ABCD" would be two nodes' IDs made one. (ThreadSanitizer
// does not follow a death test's fork; the other builds run it.)
#if !defined(__SANITIZE_THREAD__)
TEST(DocumentIdFormatDeathTest, TagTooLongIsNeverCut) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(IdSuffix("ABCDE"), "node tag \"ABCDE\" is longer than 4");
}
#endif

}  // namespace
}  // namespace hilo
