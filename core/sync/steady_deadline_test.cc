// Specification of SteadyDeadline and SteadyStopwatch: only the time that passed moves them.
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(SteadyDeadline, PassesOnceItsTimeoutHasGoneByAndNotBefore) {
  const SteadyDeadline deadline(absl::Milliseconds(50));
  EXPECT_FALSE(deadline.Passed());
  EXPECT_GT(deadline.Left(), absl::ZeroDuration());
  EXPECT_LE(deadline.Left(), absl::Milliseconds(50));
  absl::SleepFor(absl::Milliseconds(60));
  EXPECT_TRUE(deadline.Passed());
  EXPECT_EQ(deadline.Left(), absl::ZeroDuration());
}

TEST(SteadyDeadline, WhatIsLeftShrinksAsTimeGoesBy) {
  const SteadyDeadline deadline(absl::Seconds(10));
  const absl::Duration first = deadline.Left();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_LE(deadline.Left(), first - absl::Milliseconds(20));
}

TEST(SteadyDeadline, AZeroOrNegativeTimeoutHasAlreadyPassed) {
  EXPECT_TRUE(SteadyDeadline(absl::ZeroDuration()).Passed());
  EXPECT_TRUE(SteadyDeadline(-absl::Seconds(1)).Passed());
  EXPECT_TRUE(SteadyDeadline(-absl::InfiniteDuration()).Passed());
  EXPECT_EQ(SteadyDeadline(-absl::Seconds(1)).Left(), absl::ZeroDuration());
}

TEST(SteadyDeadline, AnInfiniteTimeoutNeverPasses) {
  const SteadyDeadline never(absl::InfiniteDuration());
  EXPECT_FALSE(never.Passed());
  EXPECT_EQ(never.Left(), absl::InfiniteDuration());
}

TEST(SteadyDeadline, AVeryLongTimeoutIsFarAwayNotAnOverflow) {
  const SteadyDeadline far(absl::Hours(24 * 365 * 1000));
  EXPECT_FALSE(far.Passed());
  EXPECT_GE(far.Left(), absl::Hours(24 * 364));
}

TEST(SteadyDeadline, ADefaultDeadlineIsNeverAndNeverPasses) {
  EXPECT_EQ(SteadyDeadline(), SteadyDeadline::Never());
  EXPECT_FALSE(SteadyDeadline::Never().Passed());
  EXPECT_EQ(SteadyDeadline::Never().Left(), absl::InfiniteDuration());
  EXPECT_EQ(SteadyDeadline::Never() + absl::Seconds(5), SteadyDeadline::Never());
}

TEST(SteadyDeadline, MovedLaterItLeavesThatMuchMoreTime) {
  const SteadyDeadline passed(absl::ZeroDuration());
  const SteadyDeadline later = passed + absl::Seconds(10);
  EXPECT_TRUE(passed.Passed());
  EXPECT_FALSE(later.Passed());
  EXPECT_GT(later.Left(), absl::Seconds(9));
  EXPECT_LE(later.Left(), absl::Seconds(10));
}

TEST(SteadyDeadline, TheSoonerOfTwoIsTheSmaller) {
  const SteadyDeadline soon(absl::Seconds(1));
  const SteadyDeadline late = soon + absl::Seconds(1);
  EXPECT_LT(soon, late);
  EXPECT_FALSE(late < soon);
  EXPECT_EQ(std::min(late, soon), soon);
  EXPECT_EQ(std::min(SteadyDeadline::Never(), soon), soon);
}

TEST(SteadyStopwatch, CountsTheTimeThatPassedSinceItStarted) {
  const SteadyStopwatch stopwatch;
  EXPECT_GE(stopwatch.Elapsed(), absl::ZeroDuration());
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_GE(stopwatch.Elapsed(), absl::Milliseconds(30));
  EXPECT_LT(stopwatch.Elapsed(), absl::Seconds(30));
}

}  // namespace
}  // namespace ringsync
