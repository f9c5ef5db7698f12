// The status matchers of testing/status_matchers.h: they accept what they
// should and refuse the rest, for each status type.
#include "testing/status_matchers.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::IsOkAndHolds;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchersTest, StatusIsComparesTheCodeAndTheMessage) {
  const absl::Status status = absl::NotFoundError("no collection \"x\"");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"x\"")));
  EXPECT_THAT(status, Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(status,
              Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("y"))));
  EXPECT_THAT(status, Not(IsOk()));
  EXPECT_THAT(absl::OkStatus(), IsOk());
}

TEST(StatusMatchersTest, StatusOrIsMatchedByItsStatus) {
  const absl::StatusOr<int> error = absl::OutOfRangeError("past the end");
  EXPECT_THAT(error, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(error, Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(7), IsOk());
}

TEST(StatusMatchersTest, GrpcStatusIsMatchedAsItsAbseilStatus) {
  const grpc::Status status(grpc::StatusCode::UNAVAILABLE, "draining");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, "draining"));
  EXPECT_THAT(status, Not(StatusIs(absl::StatusCode::kUnknown)));
  EXPECT_THAT(grpc::Status::OK, IsOk());
}

TEST(StatusMatchersTest, GrpcStatusFailsOnAWrongCodeOrAWrongMessage) {
  const grpc::Status status(grpc::StatusCode::PERMISSION_DENIED,
                            "cn:x may not call SetFloor");
  const ::testing::Matcher<const grpc::Status&> right_code_wrong_message =
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("NextRange"));
  const ::testing::Matcher<const grpc::Status&> wrong_code_right_message =
      StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("SetFloor"));
  const ::testing::Matcher<const grpc::Status&> exact_message_one_off =
      StatusIs(absl::StatusCode::kPermissionDenied, "cn:x may not call");
  for (const auto* matcher :
       {&right_code_wrong_message, &wrong_code_right_message,
        &exact_message_one_off}) {
    ::testing::StringMatchResultListener listener;
    EXPECT_FALSE(matcher->MatchAndExplain(status, &listener));
    EXPECT_THAT(listener.str(),
                HasSubstr("PERMISSION_DENIED: cn:x may not call SetFloor"));
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kPermissionDenied,
                               "cn:x may not call SetFloor"));
}

TEST(StatusMatchersTest, IsOkAndHoldsNeedsAValueThatMatches) {
  EXPECT_THAT(absl::StatusOr<int>(5), IsOkAndHolds(5));
  EXPECT_THAT(absl::StatusOr<int>(5), IsOkAndHolds(::testing::Gt(4)));
  EXPECT_THAT(absl::StatusOr<int>(5), Not(IsOkAndHolds(6)));
  EXPECT_THAT(absl::StatusOr<std::string>(absl::InternalError("bad")),
              Not(IsOkAndHolds(::testing::_)));
}

TEST(StatusMatchersTest, AMismatchPrintsTheWholeStatus) {
  ::testing::StringMatchResultListener listener;
  const ::testing::Matcher<absl::Status> matcher =
      StatusIs(absl::StatusCode::kOk);
  EXPECT_FALSE(
      matcher.MatchAndExplain(absl::AbortedError("conflict"), &listener));
  EXPECT_THAT(listener.str(), HasSubstr("ABORTED: conflict"));
}

}  // namespace
}  // namespace hilo
