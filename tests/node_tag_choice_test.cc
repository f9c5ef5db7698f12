// ChooseNodeTag: which tag a node serves under, from its node-tag flags,
// in-process (the host name is injected).
#include "service/node_tag_choice.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/validation.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A host name source that counts its calls.
struct FakeHost {
  absl::StatusOr<std::string> name;
  int calls = 0;
  absl::StatusOr<std::string> operator()() {
    ++calls;
    return name;
  }
};

TEST(NodeTagChoiceTest, NoTagGivenIsADefaultedA) {
  FakeHost host{"hilo-7"};
  absl::StatusOr<NodeTagChoice> choice =
      ChooseNodeTag(NodeTagRequest(), std::ref(host));
  ASSERT_THAT(choice, IsOk());
  EXPECT_EQ(choice->node_tag, "A");
  EXPECT_TRUE(choice->defaulted);
  EXPECT_THAT(choice->alternates, IsEmpty());
  EXPECT_EQ(host.calls, 0);
  EXPECT_EQ(DefaultNodeTagNote(*choice),
            "; node tag A because no --node_tag was given: every other node "
            "serving the same collections needs its own");
}

TEST(NodeTagChoiceTest, GivenTagIsKeptAndNotDefaulted) {
  NodeTagRequest request;
  request.node_tag = "Q7";
  request.require_chosen = true;
  FakeHost host{"hilo-7"};
  absl::StatusOr<NodeTagChoice> choice = ChooseNodeTag(request, std::ref(host));
  ASSERT_THAT(choice, IsOk());
  EXPECT_EQ(choice->node_tag, "Q7");
  EXPECT_FALSE(choice->defaulted);
  EXPECT_EQ(DefaultNodeTagNote(*choice), "");
  EXPECT_EQ(host.calls, 0);
}

TEST(NodeTagChoiceTest, RequiredTagMissingIsRefusedNamingTheFlags) {
  NodeTagRequest request;
  request.require_chosen = true;
  FakeHost host{"hilo-7"};
  EXPECT_THAT(ChooseNodeTag(request, std::ref(host)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--require_node_tag: no node tag given; give "
                                 "this node its own --node_tag")));
}

TEST(NodeTagChoiceTest, TagFromHostnameOverridesNodeTag) {
  NodeTagRequest request;
  request.node_tag = "Q";
  request.from_hostname = true;
  request.require_chosen = true;
  for (const auto& [hostname, tag] :
       {std::pair{"hilo-0", "A"}, std::pair{"hilo-25", "Z"},
        std::pair{"hilo-26", "AA"}}) {
    FakeHost host{std::string(hostname)};
    absl::StatusOr<NodeTagChoice> choice =
        ChooseNodeTag(request, std::ref(host));
    ASSERT_THAT(choice, IsOk()) << hostname;
    EXPECT_EQ(choice->node_tag, tag) << hostname;
    EXPECT_FALSE(choice->defaulted);
    EXPECT_EQ(host.calls, 1);
  }
}

TEST(NodeTagChoiceTest, HostnameWithoutOrdinalIsRefused) {
  NodeTagRequest request;
  request.from_hostname = true;
  FakeHost host{"laptop"};
  EXPECT_THAT(ChooseNodeTag(request, std::ref(host)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(NodeTagChoiceTest, UnreadableHostnameIsItsOwnError) {
  NodeTagRequest request;
  request.from_hostname = true;
  FakeHost host{absl::UnavailableError("cannot read the host name")};
  EXPECT_THAT(
      ChooseNodeTag(request, std::ref(host)),
      StatusIs(absl::StatusCode::kUnavailable, "cannot read the host name"));
}

TEST(NodeTagChoiceTest, HashedTagNeedsASharedStore) {
  NodeTagRequest request;
  request.hashed_from_hostname = true;
  FakeHost host{"hilo-5d8f7-x2k9p"};
  EXPECT_THAT(ChooseNodeTag(request, std::ref(host)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--node_tag_hashed_from_hostname needs "
                                 "--store")));
  EXPECT_EQ(host.calls, 0);
}

TEST(NodeTagChoiceTest, HashedTagOverridesBothAndBringsItsAlternates) {
  NodeTagRequest request;
  request.node_tag = "Q";
  request.from_hostname = true;
  request.hashed_from_hostname = true;
  request.shared_store = true;
  FakeHost host{"hilo-3"};
  absl::StatusOr<NodeTagChoice> choice = ChooseNodeTag(request, std::ref(host));
  ASSERT_THAT(choice, IsOk());
  const std::vector<std::string> tags =
      NodeTagsHashedFromHostname("hilo-3", kHashedNodeTags);
  ASSERT_THAT(tags, SizeIs(kHashedNodeTags));
  EXPECT_EQ(choice->node_tag, tags.front());
  EXPECT_THAT(choice->alternates,
              ElementsAreArray(tags.begin() + 1, tags.end()));
  EXPECT_FALSE(choice->defaulted);
}

}  // namespace
}  // namespace hilo
