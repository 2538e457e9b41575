// EpochStrideLinks: a generation's links beyond the neighbours, connected on first use or
// ahead of it, each once, whichever thread gets there first; and which strides a worker
// connects ahead under each algorithm policy.
#include "daemon/worker/epoch_stride_links.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/sync/steady_deadline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(10);

WaitLimit Within(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }

TEST(StridesToConnectAhead, AreTheLinksOfTheStrideAlgorithmThePolicyRunsSmallAllReducesWith) {
  const AlgorithmPolicy automatic{.stride_links = true};  // direct up to 4 ranks, then doubling
  EXPECT_THAT(StridesToConnectAhead(4, automatic), ElementsAre(2, 3)) << "direct";
  EXPECT_THAT(StridesToConnectAhead(3, automatic), ElementsAre(2)) << "direct";
  EXPECT_THAT(StridesToConnectAhead(8, automatic), ElementsAre(2, 4)) << "doubling";
  EXPECT_THAT(StridesToConnectAhead(16, automatic), ElementsAre(2, 4, 8)) << "doubling";
  EXPECT_THAT(StridesToConnectAhead(2, automatic), IsEmpty()) << "the relay, on the ring link";
  EXPECT_THAT(StridesToConnectAhead(1, automatic), IsEmpty());

  AlgorithmPolicy forced = automatic;
  forced.mode = AlgorithmPolicy::Mode::kDirect;
  EXPECT_THAT(StridesToConnectAhead(5, forced), ElementsAre(2, 3, 4));
  forced.mode = AlgorithmPolicy::Mode::kDoubling;
  EXPECT_THAT(StridesToConnectAhead(4, forced), ElementsAre(2));
  forced.mode = AlgorithmPolicy::Mode::kRing;
  EXPECT_THAT(StridesToConnectAhead(8, forced), IsEmpty());
  forced.mode = AlgorithmPolicy::Mode::kRelay;
  EXPECT_THAT(StridesToConnectAhead(8, forced), IsEmpty());

  AlgorithmPolicy no_stride_links = automatic;
  no_stride_links.stride_links = false;
  EXPECT_THAT(StridesToConnectAhead(8, no_stride_links), IsEmpty());
  AlgorithmPolicy nothing_small = automatic;  // even a 4-byte all-reduce runs the ring
  nothing_small.relay_max_bytes = 0;
  EXPECT_THAT(StridesToConnectAhead(8, nothing_small), IsEmpty());
}

// Hands out in-memory links for stride connections, counting them; a connection can be
// held (until released) or made to fail.
class CountingStrideLinks final : public LinkFactory {
 public:
  absl::StatusOr<std::unique_ptr<Link>> Connect(const RingEpoch&, const WaitLimit&) override {
    return std::make_unique<FaultyLink>(ring_.link(0));
  }
  absl::StatusOr<std::unique_ptr<Link>> ConnectStride(const RingEpoch&, int stride,
                                                      const WaitLimit&) override {
    calls_.fetch_add(1);
    if (hold_ != nullptr) {
      if (!announced_.exchange(true)) started_.Notify();
      hold_->WaitForNotification();
    }
    if (fail_.exchange(false)) {
      return absl::UnavailableError(absl::StrCat("stride ", stride, ": no route to rank"));
    }
    return std::make_unique<FaultyLink>(ring_.link(0));
  }
  void RetireBefore(uint64_t, const absl::Status&) override {}
  void CloseAll(const absl::Status&) override {}

  int calls() const { return calls_.load(); }
  void HoldUntil(absl::Notification& release) { hold_ = &release; }
  void FailNext() { fail_.store(true); }
  absl::Notification& started() { return started_; }

 private:
  MemoryRing ring_{1};
  std::atomic<int> calls_{0};
  std::atomic<bool> fail_{false};
  absl::Notification* hold_ = nullptr;
  std::atomic<bool> announced_{false};
  absl::Notification started_;  // the first held connection began
};

class EpochStrideLinksTest : public ::testing::Test {
 protected:
  EpochStrideLinksTest() {
    epoch_.me = RingMember{0, 4, 1};
    epoch_.link = *factory_.Connect(epoch_, Within(kWait));
  }

  CountingStrideLinks factory_;
  RingEpoch epoch_;
  std::atomic<uint64_t> connected_total_{0};
  EpochStrideLinks links_{epoch_, factory_, connected_total_};
};

TEST_F(EpochStrideLinksTest, LinksConnectedAheadServeTheirFirstUseWithoutConnectingAgain) {
  ASSERT_TRUE(links_.ConnectAhead({2, 3}, Within(kWait)).ok());
  EXPECT_EQ(factory_.calls(), 2);
  EXPECT_EQ(epoch_.stride_links_open.load(), 2);
  EXPECT_EQ(connected_total_.load(), 2u);
  absl::StatusOr<Link*> two = links_.Stride(2, Within(kWait));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(links_.Stride(2, Within(kWait)).value(), *two);
  EXPECT_EQ(links_.Stride(1, Within(kWait)).value(), epoch_.link.get()) << "the ring link";
  EXPECT_EQ(factory_.calls(), 2);
  EXPECT_EQ(links_.Connected().size(), 3u);
  ASSERT_TRUE(links_.ConnectAhead({2, 3}, Within(kWait)).ok()) << "already connected";
  EXPECT_EQ(factory_.calls(), 2);
}

TEST_F(EpochStrideLinksTest, AFirstUseWhileTheLinkIsConnectedAheadWaitsForThatConnection) {
  absl::Notification release;
  factory_.HoldUntil(release);
  std::thread ahead([&] { EXPECT_TRUE(links_.ConnectAhead({2}, Within(kWait)).ok()); });
  factory_.started().WaitForNotification();
  std::atomic<bool> returned{false};
  absl::StatusOr<Link*> used;
  std::thread collective([&] {
    used = links_.Stride(2, Within(kWait));
    returned.store(true);
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(returned.load()) << "it waits for the connection under way";
  release.Notify();
  collective.join();
  ahead.join();
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(factory_.calls(), 1) << "one connection, not two";
  EXPECT_THAT(links_.Connected(), ElementsAre(epoch_.link.get(), *used));
}

TEST_F(EpochStrideLinksTest, AFirstUseGivesUpWaitingForAConnectionUnderWayAtItsLimit) {
  absl::Notification release;
  factory_.HoldUntil(release);
  std::thread ahead([&] { (void)links_.ConnectAhead({2}, Within(kWait)); });
  factory_.started().WaitForNotification();
  const absl::StatusOr<Link*> used = links_.Stride(2, Within(absl::Milliseconds(50)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(used.status())) << used.status();
  EXPECT_THAT(used.status().message(), HasSubstr("the link of stride 2"));
  release.Notify();
  ahead.join();
}

TEST_F(EpochStrideLinksTest, ALinkThatFailedToConnectAheadIsConnectedOnItsFirstUse) {
  factory_.FailNext();
  const absl::Status ahead = links_.ConnectAhead({2, 3}, Within(kWait));
  EXPECT_TRUE(absl::IsUnavailable(ahead)) << ahead;
  EXPECT_THAT(ahead.message(), HasSubstr("stride 2"));
  EXPECT_EQ(epoch_.stride_links_open.load(), 1) << "stride 3 connected all the same";
  absl::StatusOr<Link*> used = links_.Stride(2, Within(kWait));
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(factory_.calls(), 3);
  EXPECT_EQ(epoch_.stride_links_open.load(), 2);
}

TEST_F(EpochStrideLinksTest, ConnectingAheadStopsWhenTheGenerationEnds) {
  Cancellation over;
  over.Cancel(absl::AbortedError("generation 1 ended"));
  const absl::Status ahead = links_.ConnectAhead({2, 3}, WaitLimit{SteadyDeadline(kWait), &over});
  EXPECT_TRUE(absl::IsCancelled(ahead)) << ahead;
  EXPECT_EQ(factory_.calls(), 0);
}

}  // namespace
}  // namespace ringsync
