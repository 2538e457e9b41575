// Specification of Cancellation and of how a wait ends (AwaitWithLimit).
#include "core/sync/cancellation.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/sync/steady_stopwatch.h"
#include "core/sync/wait_limit.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(Cancellation, TheFirstReasonGivenWins) {
  Cancellation c;
  EXPECT_FALSE(c.IsCancelled());
  EXPECT_TRUE(c.reason().ok());
  c.Cancel(absl::AbortedError("first"));
  c.Cancel(absl::CancelledError("second"));
  EXPECT_TRUE(c.IsCancelled());
  EXPECT_EQ(c.reason(), absl::AbortedError("first"));
}

TEST(Cancellation, AChildIsCancelledWithEitherParentForItsReason) {
  Cancellation inside, outside;
  Cancellation child(&inside, &outside);
  EXPECT_FALSE(child.IsCancelled());
  outside.Cancel(absl::CancelledError("the client left"));
  EXPECT_TRUE(child.IsCancelled());
  EXPECT_EQ(child.reason(), absl::CancelledError("the client left"));
  EXPECT_FALSE(inside.IsCancelled());  // never the other way
}

TEST(Cancellation, AChildWithAConditionIsCancelledOnceItHoldsForItsReason) {
  Cancellation parent;
  std::atomic<bool> happened{false};
  const Cancellation child(&parent, [&] { return happened.load(); },
                           absl::AbortedError("the ring gave up"));
  EXPECT_FALSE(child.IsCancelled());
  EXPECT_TRUE(child.reason().ok());
  happened = true;
  EXPECT_TRUE(child.IsCancelled());
  EXPECT_EQ(child.reason(), absl::AbortedError("the ring gave up"));
  EXPECT_FALSE(parent.IsCancelled());
}

TEST(Cancellation, AChildWithAConditionStillFollowsItsParent) {
  Cancellation parent;
  const Cancellation child(&parent, [] { return false; }, absl::AbortedError("never"));
  parent.Cancel(absl::CancelledError("cancelled from outside"));
  EXPECT_TRUE(child.IsCancelled());
  EXPECT_EQ(child.reason(), absl::CancelledError("cancelled from outside"));
}

TEST(AwaitWithLimit, AWaitEndsSoonAfterAConditionNobodySignalsComesTrue) {
  // Nothing touches the waiter's mutex: the wait notices by polling its limit.
  absl::Mutex mu;
  bool never = false;
  std::atomic<bool> happened{false};
  const Cancellation stop(nullptr, [&] { return happened.load(); },
                          absl::AbortedError("an abort arrived"));
  std::jthread elsewhere([&] {
    absl::SleepFor(absl::Milliseconds(50));
    happened = true;
  });
  const SteadyStopwatch start;
  absl::MutexLock lock(&mu);
  const absl::Status waited =
      AwaitWithLimit(mu, absl::Condition(&never), {SteadyDeadline(absl::Seconds(20)), &stop}, "waiting");
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
}

TEST(AwaitWithLimit, EndsAtTheDeadlineWhenNothingHappens) {
  absl::Mutex mu;
  bool never = false;
  absl::MutexLock lock(&mu);
  const absl::Status waited = AwaitWithLimit(
      mu, absl::Condition(&never), {SteadyDeadline(absl::Milliseconds(20)), nullptr}, "waiting");
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_EQ(waited.message(), "waiting: timed out");
}

TEST(AwaitWithLimit, NeverGivesUpBeforeItsDeadlineHasPassedOnTheMonotonicClock) {
  // Abseil times its own waits against the wall clock, which may run a little apart from
  // the monotonic one; the deadline is the monotonic clock's, to the microsecond.
  absl::Mutex mu;
  bool never = false;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const SteadyStopwatch start;
    absl::MutexLock lock(&mu);
    const absl::Status waited = AwaitWithLimit(
        mu, absl::Condition(&never), {SteadyDeadline(absl::Milliseconds(7)), nullptr}, "waiting");
    EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
    EXPECT_GE(start.Elapsed(), absl::Milliseconds(7));
  }
}

}  // namespace
}  // namespace ringsync
