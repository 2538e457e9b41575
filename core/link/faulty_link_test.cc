// Specification of FaultyLink: each scripted fault does exactly what it says to the
// scripted Send, and nothing to the others.
#include "core/link/faulty_link.h"

#include <string>
#include <thread>

#include "core/link/memory_link.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }

Frame Step(uint32_t step) {
  Frame f;
  f.step = step;
  return f;
}

class FaultyLinkTest : public ::testing::Test {
 protected:
  MemoryRing ring_{2};
  FaultyLink faulty_{ring_.link(0)};  // rank 0's sends go through it
  Link& receiver_ = ring_.link(1);
};

TEST_F(FaultyLinkTest, UnscriptedSendsPassThroughAndAreCounted) {
  ASSERT_TRUE(faulty_.Send(Step(0), {}, In(absl::Seconds(1))).ok());
  ASSERT_TRUE(faulty_.Send(Step(1), {}, In(absl::Seconds(1))).ok());
  EXPECT_EQ(receiver_.Receive(In(absl::Seconds(1)))->frame.step, 0u);
  EXPECT_EQ(receiver_.Receive(In(absl::Seconds(1)))->frame.step, 1u);
  EXPECT_EQ(faulty_.sends(), 2u);
}

TEST_F(FaultyLinkTest, ADroppedFrameNeverArrivesAndItsSendSucceeds) {
  faulty_.Script(0, LinkFault::Drop());
  ASSERT_TRUE(faulty_.Send(Step(0), {}, In(absl::Seconds(1))).ok());
  ASSERT_TRUE(faulty_.Send(Step(1), {}, In(absl::Seconds(1))).ok());
  EXPECT_EQ(receiver_.Receive(In(absl::Seconds(1)))->frame.step, 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(receiver_.Receive(In(absl::Milliseconds(30))).status()));
}

TEST_F(FaultyLinkTest, ADelayedFrameArrivesAfterItsDelay) {
  faulty_.Script(0, LinkFault::Delay(absl::Milliseconds(80)));
  const SteadyStopwatch start;
  ASSERT_TRUE(faulty_.Send(Step(0), {}, In(absl::Seconds(5))).ok());
  EXPECT_GE(start.Elapsed(), absl::Milliseconds(80));
  EXPECT_TRUE(receiver_.Receive(In(absl::Seconds(1))).ok());
}

TEST_F(FaultyLinkTest, ADelayPastTheDeadlineFailsTheSendAtItsDeadline) {
  faulty_.Script(0, LinkFault::Delay(absl::Seconds(30)));
  const absl::Status s = faulty_.Send(Step(0), {}, In(absl::Milliseconds(50)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(absl::IsDeadlineExceeded(receiver_.Receive(In(absl::Milliseconds(30))).status()));
}

TEST_F(FaultyLinkTest, ACorruptedFrameArrivesOutOfPlace) {
  faulty_.Script(0, LinkFault::Corrupt());
  ASSERT_TRUE(faulty_.Send(Step(4), {}, In(absl::Seconds(1))).ok());
  EXPECT_EQ(receiver_.Receive(In(absl::Seconds(1)))->frame.step, 5u);
}

TEST_F(FaultyLinkTest, AStalledSendEndsAtItsDeadlineOrSoonAfterCancellation) {
  faulty_.Script(0, LinkFault::Stall());
  faulty_.Script(1, LinkFault::Stall());
  EXPECT_TRUE(absl::IsDeadlineExceeded(faulty_.Send(Step(0), {}, In(absl::Milliseconds(30)))));

  Cancellation cancellation;
  std::jthread canceller([&] {
    absl::SleepFor(absl::Milliseconds(20));
    cancellation.Cancel(absl::CancelledError("test"));
  });
  const absl::Status s =
      faulty_.Send(Step(1), {}, WaitLimit{SteadyDeadline(absl::Seconds(30)), &cancellation});
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
}

TEST_F(FaultyLinkTest, AClosedLinkFailsThatSendAndEveryLaterOne) {
  faulty_.Script(1, LinkFault::Close());
  ASSERT_TRUE(faulty_.Send(Step(0), {}, In(absl::Seconds(1))).ok());
  for (uint32_t step : {1u, 2u, 3u}) {
    const absl::Status s = faulty_.Send(Step(step), {}, In(absl::Seconds(1)));
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("closed by fault injection"));
  }
  EXPECT_EQ(receiver_.Receive(In(absl::Seconds(1)))->frame.step, 0u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(receiver_.Receive(In(absl::Milliseconds(30))).status()));
}

}  // namespace
}  // namespace ringsync
