// RingManager over a real Peer server: a one-worker ring (the worker is its own
// neighbour), views applied as the coordinator session applies them.
#include "daemon/worker/ring_manager.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/transport/grpc/testing/peer_test_server.h"
#include "daemon/worker/grpc_link_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

class RingManagerTest : public ::testing::Test {
 protected:
  ~RingManagerTest() override { ring_.Shutdown(); }

  v1::RingView View(uint64_t generation) const {
    v1::RingView view;
    view.set_generation(generation);
    v1::RingMember* me = view.add_members();
    me->set_worker_id("w0");
    me->set_peer_address(peer_.address);
    return view;
  }

  // Waits until the status reports `ready`; returns the last status.
  RingStatus AwaitReadiness(bool ready) {
    const SteadyDeadline deadline(kWait);
    RingStatus status = ring_.Status();
    while (status.ready != ready && !deadline.Passed()) {
      status = ring_.AwaitChange(status.version, absl::Milliseconds(100));
    }
    return status;
  }

  testing::PeerTestServer peer_;
  GrpcLinkFactory links_{"w0", peer_.registry};
  RingManager ring_{"w0", links_, kWait};
};

TEST_F(RingManagerTest, AViewFormsTheRing) {
  ring_.OnView(View(1));
  const RingStatus status = AwaitReadiness(true);
  EXPECT_TRUE(status.ready) << status.detail;
  EXPECT_EQ(status.generation, 1u);
  EXPECT_EQ(status.rank, 0);
  ASSERT_NE(ring_.Ready(), nullptr);
}

TEST_F(RingManagerTest, ALostSessionHoldsNewCollectivesUntilANewerGenerationReplacesTheEpoch) {
  ring_.OnView(View(1));
  ASSERT_TRUE(AwaitReadiness(true).ready);
  std::shared_ptr<RingEpoch> old_epoch = ring_.Ready();

  ring_.Suspend("worker w0 missed heartbeats for 5s");
  RingStatus status = ring_.Status();
  EXPECT_FALSE(status.ready);
  EXPECT_THAT(status.detail, HasSubstr("generation 1 is suspended"));
  EXPECT_THAT(status.detail, HasSubstr("missed heartbeats"));
  EXPECT_EQ(ring_.Ready(), nullptr);
  Cancellation never;
  absl::StatusOr<std::shared_ptr<RingEpoch>> waited =
      ring_.AwaitReady(WaitLimit{SteadyDeadline(absl::Milliseconds(200)), &never});
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr("suspended"));
  // Collectives in flight are not cancelled by the suspension itself...
  EXPECT_FALSE(old_epoch->over.IsCancelled());

  // ...but by the newer generation the coordinator publishes after the rejoin.
  ring_.OnView(View(3));
  EXPECT_TRUE(old_epoch->over.IsCancelled());
  status = AwaitReadiness(true);
  EXPECT_TRUE(status.ready) << status.detail;
  EXPECT_EQ(status.generation, 3u);
  EXPECT_NE(ring_.Ready(), old_epoch);
}

TEST_F(RingManagerTest, ARestartedCoordinatorsOlderViewResumesTheFormedRing) {
  ring_.OnView(View(5));
  ASSERT_TRUE(AwaitReadiness(true).ready);
  std::shared_ptr<RingEpoch> epoch = ring_.Ready();
  ring_.Suspend("the coordinator restarted");
  ASSERT_FALSE(ring_.Status().ready);

  ring_.OnView(View(1));  // a restarted coordinator counts from 1 again
  const RingStatus status = ring_.Status();
  EXPECT_TRUE(status.ready) << status.detail;
  EXPECT_EQ(status.generation, 5u);
  EXPECT_EQ(ring_.Ready(), epoch);
  EXPECT_FALSE(epoch->over.IsCancelled());
}

TEST_F(RingManagerTest, ACollectiveWaitingForADissolvedRingFailsAtOnceNamingTheLostWorker) {
  ring_.OnView(View(1));
  ASSERT_TRUE(AwaitReadiness(true).ready);
  ring_.Suspend("worker w0 missed heartbeats for 5s");  // nothing may start: a waiter blocks
  Cancellation never;
  const WaitLimit long_limit{SteadyDeadline(absl::Seconds(60)), &never};
  absl::StatusOr<std::shared_ptr<RingEpoch>> waited;
  absl::Time returned;
  std::thread waiter([&] {
    waited = ring_.AwaitReady(long_limit);
    returned = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(50));

  v1::RingView dissolved;
  dissolved.set_generation(2);
  dissolved.set_dissolved_reason("worker w2 (rank 2) closed its WatchRing stream");
  const absl::Time dissolved_at = absl::Now();
  ring_.OnView(dissolved);
  waiter.join();
  // Well inside the limit: the waiter wakes on the view itself, not on a poll or deadline.
  EXPECT_LT(returned - dissolved_at, absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr("the ring dissolved (generation 2)"));
  EXPECT_THAT(waited.status().message(), HasSubstr("worker w2 (rank 2)"));

  // A collective issued while the ring stays dissolved fails as promptly.
  const SteadyStopwatch issued;
  waited = ring_.AwaitReady(long_limit);
  EXPECT_LT(issued.Elapsed(), absl::Seconds(1));
  EXPECT_THAT(waited.status().message(), HasSubstr("worker w2 (rank 2)"));

  // The next formed ring runs collectives again.
  ring_.OnView(View(3));
  waited = ring_.AwaitReady(long_limit);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ((*waited)->me.generation, 3u);
}

TEST_F(RingManagerTest, AWorkerWhoseLeaseRanOutFencesItselfUntilTheCoordinatorRenewsIt) {
  ring_.OnView(View(1));
  ASSERT_TRUE(AwaitReadiness(true).ready);
  const uint64_t before = ring_.Status().version;
  ring_.RenewLease(MonotonicNow() + absl::Milliseconds(100));
  ASSERT_NE(ring_.Ready(), nullptr) << "the lease is held";

  // No renewal for the lease period (the worker was frozen, or cut off): from then on
  // nothing starts on its generation and it says why, before anyone published the lapse.
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(ring_.Ready(), nullptr);
  RingStatus status = ring_.Status();
  EXPECT_FALSE(status.ready);
  EXPECT_THAT(status.detail, HasSubstr("generation 1 is fenced"));
  EXPECT_THAT(status.detail, HasSubstr("lease"));
  Cancellation never;
  absl::StatusOr<std::shared_ptr<RingEpoch>> waited =
      ring_.AwaitReady(WaitLimit{SteadyDeadline(absl::Milliseconds(100)), &never});
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr("fenced"));

  // The lapse is published (the attached client hears of it as a status change)...
  ring_.CheckLease();
  status = ring_.Status();
  EXPECT_GT(status.version, before);
  EXPECT_FALSE(status.ready);
  // ...and a renewal that was itself too late changes nothing.
  ring_.RenewLease(MonotonicNow() - absl::Milliseconds(1));
  EXPECT_EQ(ring_.Ready(), nullptr);

  // A heartbeat the coordinator accepted in time: the generation is still current.
  ring_.RenewLease(MonotonicNow() + absl::Seconds(60));
  status = ring_.Status();
  EXPECT_TRUE(status.ready) << status.detail;
  EXPECT_NE(ring_.Ready(), nullptr);
}

TEST_F(RingManagerTest, AFencedWorkerWhoseSessionWasLostWaitsForANewView) {
  ring_.OnView(View(1));
  ASSERT_TRUE(AwaitReadiness(true).ready);
  ring_.RenewLease(MonotonicNow() + absl::Milliseconds(50));
  absl::SleepFor(absl::Milliseconds(80));
  ring_.CheckLease();
  // The coordinator evicted it: its heartbeat is refused, it rejoins (a new lease)...
  ring_.Suspend("worker w0 missed heartbeats");
  ring_.RenewLease(MonotonicNow() + absl::Seconds(60));
  EXPECT_FALSE(ring_.Status().ready) << "the old generation stays suspended";
  EXPECT_EQ(ring_.Ready(), nullptr);
  // ...and only the view the coordinator then publishes makes it ready.
  ring_.OnView(View(2));
  const RingStatus status = AwaitReadiness(true);
  EXPECT_TRUE(status.ready) << status.detail;
  EXPECT_EQ(status.generation, 2u);
}

TEST_F(RingManagerTest, SuspendingWithoutARingChangesNothing) {
  ring_.Suspend("never joined");
  EXPECT_THAT(ring_.Status().detail, HasSubstr("waiting for the coordinator"));
}

// A LinkFactory whose first `failures` connections fail (as a neighbour that is still
// starting does), then hands out an in-memory link to itself.
class FlakyLinks final : public LinkFactory {
 public:
  explicit FlakyLinks(int failures) : failures_(failures) {}
  absl::StatusOr<std::unique_ptr<Link>> Connect(const RingEpoch&, const WaitLimit&) override {
    if (attempts_.fetch_add(1) < failures_) {
      return absl::DeadlineExceededError("connecting the ring stream: no answer in time");
    }
    return std::make_unique<FaultyLink>(memory_.link(0));
  }
  absl::StatusOr<std::unique_ptr<Link>> ConnectStride(const RingEpoch&, int stride,
                                                      const WaitLimit&) override {
    strides_.fetch_add(stride);
    return std::make_unique<FaultyLink>(memory_.link(0));
  }
  void RetireBefore(uint64_t, const absl::Status&) override {}
  void CloseAll(const absl::Status&) override {}
  int attempts() const { return attempts_.load(); }
  int sum_of_strides_connected() const { return strides_.load(); }

 private:
  const int failures_;
  std::atomic<int> attempts_{0};
  std::atomic<int> strides_{0};
  MemoryRing memory_{1};
};

v1::RingView OneWorkerView() {
  v1::RingView view;
  view.set_generation(1);
  v1::RingMember* me = view.add_members();
  me->set_worker_id("w0");
  me->set_peer_address("127.0.0.1:1");
  return view;
}

TEST(RingManagerRetry, AConnectionThatFailsIsTriedAgainUntilTheRingForms) {
  FlakyLinks links(/*failures=*/2);
  RingManager ring("w0", links, kWait);
  ring.OnView(OneWorkerView());
  absl::StatusOr<std::shared_ptr<RingEpoch>> epoch =
      ring.AwaitReady(WaitLimit{SteadyDeadline(kWait), nullptr});
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(links.attempts(), 3);
  EXPECT_TRUE(ring.Status().ready);
  ring.Shutdown();
}

// Once the ring forms, the links the worker's small all-reduces use are connected with no
// collective asking for them; the world size decides which.
TEST(RingManagerStrideLinks, AreConnectedAheadOnceTheRingForms) {
  FlakyLinks links(/*failures=*/0);
  std::atomic<int> asked_for_ranks{0};
  RingManager ring("w0", links, kWait, ConnectRetry{}, [&](int world_size) {
    asked_for_ranks.store(world_size);
    return std::vector<int>{2, 3};
  });
  ring.OnView(OneWorkerView());
  absl::StatusOr<std::shared_ptr<RingEpoch>> epoch =
      ring.AwaitReady(WaitLimit{SteadyDeadline(kWait), nullptr});
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  for (const SteadyDeadline deadline(kWait);
       (*epoch)->stride_links_open.load() < 2 && !deadline.Passed();) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ((*epoch)->stride_links_open.load(), 2);
  EXPECT_EQ(ring.stride_links_connected(), 2u);
  EXPECT_EQ(links.sum_of_strides_connected(), 2 + 3);
  EXPECT_EQ(asked_for_ranks.load(), 1);
  ring.Shutdown();
}

}  // namespace
}  // namespace ringsync
