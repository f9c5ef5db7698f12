#include "service/store/validation.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;

struct NameCase {
  std::string label;
  std::string name;
  absl::StatusCode code;
  std::string message_part;
};

void PrintTo(const NameCase& c, std::ostream* os) { *os << c.label; }

class CollectionNameTest : public ::testing::TestWithParam<NameCase> {};

TEST_P(CollectionNameTest, AcceptsOrRejectsWithReason) {
  const NameCase& c = GetParam();
  const absl::Status status = ValidateCollectionName(c.name);
  EXPECT_THAT(status, StatusIs(c.code));
  EXPECT_NE(status.message().find(c.message_part), absl::string_view::npos)
      << status;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CollectionNameTest,
    ::testing::Values(
        NameCase{"Plain", "orders", absl::StatusCode::kOk, ""},
        NameCase{"OneByte", "x", absl::StatusCode::kOk, ""},
        NameCase{"Max256", std::string(256, 'a'), absl::StatusCode::kOk, ""},
        NameCase{"Utf8",
                 "b\xC3\xBC"
                 "cher/\xE6\x97\xA5\xF0\x9F\x98\x80",
                 absl::StatusCode::kOk, ""},
        NameCase{"SpacesAndPunctuation", "my orders|2024 #1",
                 absl::StatusCode::kOk, ""},
        NameCase{"Empty", "", absl::StatusCode::kInvalidArgument, "empty"},
        NameCase{"TooLong", std::string(257, 'a'),
                 absl::StatusCode::kInvalidArgument,
                 "257 bytes; the limit is 256"},
        NameCase{"BadContinuation", "ab\xC3(",
                 absl::StatusCode::kInvalidArgument,
                 "not valid UTF-8 at byte 2"},
        NameCase{"Truncated", "ab\xE6\x97", absl::StatusCode::kInvalidArgument,
                 "not valid UTF-8"},
        NameCase{"Overlong", "\xC0\xAF", absl::StatusCode::kInvalidArgument,
                 "not valid UTF-8"},
        NameCase{"Surrogate", "\xED\xA0\x80",
                 absl::StatusCode::kInvalidArgument, "not valid UTF-8"},
        NameCase{"BeyondUnicode", "\xF4\x90\x80\x80",
                 absl::StatusCode::kInvalidArgument, "not valid UTF-8"},
        NameCase{"LoneContinuation", "\x80", absl::StatusCode::kInvalidArgument,
                 "not valid UTF-8"},
        NameCase{"Nul", std::string("a\0b", 3),
                 absl::StatusCode::kInvalidArgument,
                 "control character U+0000 at byte 1"},
        NameCase{"Newline", "a\nb", absl::StatusCode::kInvalidArgument,
                 "U+000A"},
        NameCase{"Delete", "a\x7F", absl::StatusCode::kInvalidArgument,
                 "U+007F"},
        NameCase{"C1Control", "a\xC2\x85", absl::StatusCode::kInvalidArgument,
                 "U+0085"}),
    [](const ::testing::TestParamInfo<NameCase>& info) {
      return info.param.label;
    });

TEST(NodeTagTest, AcceptsOneToFourUppercaseLettersAndDigits) {
  for (const char* tag : {"A", "Z", "B7", "NODE", "0000"}) {
    EXPECT_THAT(ValidateNodeTag(tag), IsOk()) << tag;
  }
}

TEST(NodeTagTest, RejectsEmptyLongAndOtherCharacters) {
  for (const char* tag : {"", "ABCDE", "a", "A-B", "A B", "\xC3\x84"}) {
    EXPECT_THAT(ValidateNodeTag(tag),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << tag;
  }
}

TEST(NodeTagFromHostnameTest, MapsStatefulSetOrdinalsToLetters) {
  const std::pair<const char*, const char*> cases[] = {
      {"hilo-0", "A"},     {"hilo-1", "B"},    {"hilo-2", "C"},
      {"hilo-25", "Z"},    {"hilo-26", "AA"},  {"hilo-27", "AB"},
      {"hilo-51", "AZ"},   {"hilo-52", "BA"},  {"hilo-701", "ZZ"},
      {"hilo-702", "AAA"}, {"my-hilo-3", "D"}, {"hilo-475253", "ZZZZ"},
  };
  for (const auto& [host, tag] : cases) {
    absl::StatusOr<std::string> got = NodeTagFromHostname(host);
    ASSERT_THAT(got, IsOk()) << host << ": " << got.status();
    EXPECT_EQ(*got, tag) << host;
  }
}

TEST(NodeTagsHashedFromHostnameTest, AreValidDistinctAndTheSameForTheSameName) {
  const std::vector<std::string> tags =
      NodeTagsHashedFromHostname("hilo-7c9d5b8f4-x2x7q", 16);
  ASSERT_EQ(tags.size(), 16u);
  for (const std::string& tag : tags) {
    EXPECT_THAT(ValidateNodeTag(tag), IsOk()) << tag;
    EXPECT_EQ(tag.size(), 4u);
  }
  EXPECT_EQ(std::set<std::string>(tags.begin(), tags.end()).size(), 16u);
  EXPECT_EQ(NodeTagsHashedFromHostname("hilo-7c9d5b8f4-x2x7q", 16), tags);
  // Asking for fewer gives the first ones: a pod keeps its preferred tag.
  EXPECT_EQ(NodeTagsHashedFromHostname("hilo-7c9d5b8f4-x2x7q", 1),
            std::vector<std::string>{tags[0]});
  // Pods of one ReplicaSet differ in their last five characters.
  std::set<std::string> first;
  for (const char* pod : {"hilo-7c9d5b8f4-x2x7q", "hilo-7c9d5b8f4-x2x7r",
                          "hilo-7c9d5b8f4-q8n4k", "hilo-7c9d5b8f4-bbm2w"}) {
    first.insert(NodeTagsHashedFromHostname(pod, 1)[0]);
  }
  EXPECT_EQ(first.size(), 4u);
}

TEST(NodeTagFromHostnameTest, RejectsNamesWithoutOrdinal) {
  for (const char* host :
       {"hilo", "hilo-", "hilo-x", "hilo-1a", "hilo-+1", "hilo-475254"}) {
    EXPECT_THAT(NodeTagFromHostname(host),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << host;
  }
}

}  // namespace
}  // namespace hilo
