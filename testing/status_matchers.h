// gMock matchers for absl::Status, absl::StatusOr<T> and grpc::Status, in
// the shape of Abseil's absl/status/status_matchers.h (which Debian 12's
// Abseil predates):
//
//   EXPECT_THAT(store->Get("x"), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
//                                HasSubstr("collection name")));
//   EXPECT_THAT(store->Next("orders", 32), IsOkAndHolds(Field(&R::low, 1)));
//   ASSERT_THAT(stub->NextRange(&ctx, req, &resp), IsOk());
//
// A grpc::Status is matched as the absl::Status it converts to
// (hilo/v1/conversions.h), so one set of codes serves both. On a mismatch
// the whole status is printed. Header-only; needs GTest::gmock.
#ifndef HILO_TESTING_STATUS_MATCHERS_H_
#define HILO_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "hilo/v1/conversions.h"

namespace hilo::testing_util {
namespace internal_status {

inline absl::Status GetStatus(const absl::Status& status) { return status; }
inline absl::Status GetStatus(const grpc::Status& status) {
  return FromGrpcStatus(status);
}
template <typename T>
absl::Status GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// StatusIs(code, message_matcher) for one status type.
template <typename StatusType>
class StatusIsMatcherImpl : public ::testing::MatcherInterface<StatusType> {
 public:
  StatusIsMatcherImpl(absl::StatusCode code,
                      ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  bool MatchAndExplain(
      StatusType actual,
      ::testing::MatchResultListener* listener) const override {
    const absl::Status status = GetStatus(actual);
    *listener << "whose status is " << status;
    if (status.code() != code_) return false;
    return message_.MatchAndExplain(std::string(status.message()), listener);
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "has status code " << absl::StatusCodeToString(code_)
        << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "does not have status code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  const absl::StatusCode code_;
  const ::testing::Matcher<const std::string&> message_;
};

class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code,
                  ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename StatusType>
  operator ::testing::Matcher<StatusType>() const {  // NOLINT: gMock idiom
    return ::testing::Matcher<StatusType>(
        new StatusIsMatcherImpl<StatusType>(code_, message_));
  }

 private:
  const absl::StatusCode code_;
  const ::testing::Matcher<const std::string&> message_;
};

// IsOkAndHolds(value_matcher) for one StatusOr type.
template <typename StatusOrType>
class IsOkAndHoldsMatcherImpl
    : public ::testing::MatcherInterface<StatusOrType> {
 public:
  using Value = typename std::remove_reference_t<StatusOrType>::value_type;

  template <typename InnerMatcher>
  explicit IsOkAndHoldsMatcherImpl(InnerMatcher&& inner)
      : inner_(::testing::SafeMatcherCast<const Value&>(
            std::forward<InnerMatcher>(inner))) {}

  bool MatchAndExplain(
      StatusOrType actual,
      ::testing::MatchResultListener* listener) const override {
    if (!actual.ok()) {
      *listener << "whose status is " << actual.status();
      return false;
    }
    ::testing::StringMatchResultListener inner;
    const bool matches = inner_.MatchAndExplain(*actual, &inner);
    const std::string explanation = inner.str();
    if (!explanation.empty()) *listener << "whose value " << explanation;
    return matches;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "is OK and has a value that ";
    inner_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "is not OK or has a value that ";
    inner_.DescribeNegationTo(os);
  }

 private:
  const ::testing::Matcher<const Value&> inner_;
};

template <typename InnerMatcher>
class IsOkAndHoldsMatcher {
 public:
  explicit IsOkAndHoldsMatcher(InnerMatcher inner) : inner_(std::move(inner)) {}

  template <typename StatusOrType>
  operator ::testing::Matcher<StatusOrType>() const {  // NOLINT: gMock idiom
    return ::testing::Matcher<StatusOrType>(
        new IsOkAndHoldsMatcherImpl<const StatusOrType&>(inner_));
  }

 private:
  const InnerMatcher inner_;
};

}  // namespace internal_status

// Matches a status (or a StatusOr's status) with code `code` and a message
// that `message` matches (anything, if left out).
inline internal_status::StatusIsMatcher StatusIs(
    absl::StatusCode code,
    ::testing::Matcher<const std::string&> message = ::testing::_) {
  return internal_status::StatusIsMatcher(code, std::move(message));
}

// Matches an OK status, or a StatusOr that holds a value.
inline internal_status::StatusIsMatcher IsOk() {
  return StatusIs(absl::StatusCode::kOk);
}

// Matches an OK StatusOr whose value `inner` matches (a matcher or a value).
template <typename InnerMatcher>
internal_status::IsOkAndHoldsMatcher<std::decay_t<InnerMatcher>> IsOkAndHolds(
    InnerMatcher&& inner) {
  return internal_status::IsOkAndHoldsMatcher<std::decay_t<InnerMatcher>>(
      std::forward<InnerMatcher>(inner));
}

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_STATUS_MATCHERS_H_
