#include "core/outcome.h"

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(OutcomeMark, AFailureCarriesItsMarkAndKeepsCodeAndMessage) {
  absl::Status s = WithOutcomeMark(absl::AbortedError("ring re-formed"),
                                   OutcomeMark::kMembershipChanged);
  EXPECT_EQ(OutcomeMarkOf(s), OutcomeMark::kMembershipChanged);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "ring re-formed");
}

TEST(OutcomeMark, AnUnmarkedFailureAndOkHaveNone) {
  EXPECT_EQ(OutcomeMarkOf(absl::UnavailableError("x")), OutcomeMark::kNone);
  EXPECT_EQ(OutcomeMarkOf(absl::OkStatus()), OutcomeMark::kNone);
  EXPECT_EQ(OutcomeMarkOf(WithOutcomeMark(absl::OkStatus(), OutcomeMark::kInDoubt)),
            OutcomeMark::kNone);
}

TEST(OutcomeMark, ANewMarkReplacesTheOldAndNoneErasesIt) {
  absl::Status s = WithOutcomeMark(absl::UnknownError("x"), OutcomeMark::kMembershipChanged);
  s = WithOutcomeMark(s, OutcomeMark::kInDoubt);
  EXPECT_EQ(OutcomeMarkOf(s), OutcomeMark::kInDoubt);
  EXPECT_EQ(OutcomeMarkOf(WithOutcomeMark(s, OutcomeMark::kNone)), OutcomeMark::kNone);
}

TEST(OutcomeMark, NamesRoundTripAndUnknownNamesAreRefused) {
  for (OutcomeMark mark : {OutcomeMark::kMembershipChanged, OutcomeMark::kInDoubt}) {
    EXPECT_EQ(ParseOutcomeMark(OutcomeMarkName(mark)), mark);
  }
  EXPECT_FALSE(ParseOutcomeMark("").has_value());
  EXPECT_FALSE(ParseOutcomeMark("committed").has_value());
}

}  // namespace
}  // namespace ringsync
