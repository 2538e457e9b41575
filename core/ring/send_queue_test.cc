// SendQueue: segments go out in post order, over a link that posts sends (its outcomes
// come back in any order) and over one that does not (the queue's own thread sends);
// a failed send fails the pipeline and wakes the receiving side; Close never returns
// while a posted payload may still be read.
#include "core/ring/send_queue.h"

#include <optional>
#include <vector>

#include "core/link/memory_link.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

// A link that posts sends and hands their outcomes to the test.
class PostingLink final : public Link {
 public:
  bool posts_sends() const override { return true; }
  void PostSend(const Frame& frame, absl::Span<const std::byte> payload, const WaitLimit&,
                SendDone done) override {
    absl::MutexLock lock(&mu_);
    posted_.push_back({frame, payload.size(), std::move(done)});
  }
  void AbandonPostedSends() override {
    absl::MutexLock lock(&mu_);
    ++abandoned_;
    for (Posted& p : posted_) {
      if (p.done) std::exchange(p.done, nullptr)(absl::UnavailableError("abandoned"));
    }
  }
  absl::Status Send(const Frame&, absl::Span<const std::byte>, const WaitLimit&) override {
    return absl::InternalError("a posting link's user sent the waiting way");
  }
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    absl::MutexLock lock(&mu_);
    absl::Status waited = AwaitWithLimit(mu_, absl::Condition(&never_), limit, "receiving");
    return waited;
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override {
    absl::StatusOr<ReceivedFrame> r = Receive(limit);
    return r.status();
  }
  uint64_t newest_aborted_sequence() const override { return 0; }
  size_t queued_frames() const override { return 0; }

  // Reports the outcome of the `index`-th posted send.
  void Complete(size_t index, const absl::Status& outcome) {
    SendDone done;
    {
      absl::MutexLock lock(&mu_);
      done = std::exchange(posted_[index].done, nullptr);
    }
    done(outcome);
  }
  std::vector<uint32_t> posted_segments() const {
    absl::MutexLock lock(&mu_);
    std::vector<uint32_t> out;
    for (const Posted& p : posted_) out.push_back(p.frame.segment);
    return out;
  }
  int abandoned() const {
    absl::MutexLock lock(&mu_);
    return abandoned_;
  }

 private:
  struct Posted {
    Frame frame;
    size_t bytes;
    SendDone done;
  };
  mutable absl::Mutex mu_;
  std::vector<Posted> posted_ ABSL_GUARDED_BY(mu_);
  int abandoned_ ABSL_GUARDED_BY(mu_) = 0;
  bool never_ = false;
};

CollectiveSpec Spec() {
  CollectiveSpec spec;
  spec.sequence = 1;
  spec.count = 64;
  return spec;
}

SegmentSend Segment(int segment, absl::Span<const std::byte> payload) {
  return SegmentSend{/*step=*/0, segment, /*chunk=*/0, ElementRange{0, payload.size() / 4}, payload};
}

class SendQueueOverAPostingLink : public ::testing::Test {
 protected:
  WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }

  PostingLink link_;
  RingExchange exchange_{RingMember{0, 2, 1}, link_, Spec(), RingOptions{}};
  PipelineProgress progress_;
  std::vector<std::byte> payload_ = std::vector<std::byte>(256);
};

TEST_F(SendQueueOverAPostingLink, PostsInOrderAndCountsASendOutOnlyWithAllBeforeIt) {
  SendQueue sends(exchange_, progress_);
  for (int j = 0; j < 3; ++j) sends.Post(Segment(j, payload_));
  EXPECT_THAT(link_.posted_segments(), ::testing::ElementsAre(0, 1, 2));

  link_.Complete(1, absl::OkStatus());  // out of order: segment 0 is still out
  Cancellation now;  // a wait that only looks
  now.Cancel(absl::CancelledError("just looking"));
  EXPECT_TRUE(absl::IsCancelled(progress_.AwaitSent(1, WaitLimit{SteadyDeadline::Never(), &now})));
  EXPECT_FALSE(sends.AwaitFinished(absl::ZeroDuration()));
  link_.Complete(0, absl::OkStatus());
  EXPECT_TRUE(progress_.AwaitSent(2, In(absl::Seconds(5))).ok());
  link_.Complete(2, absl::OkStatus());
  EXPECT_TRUE(sends.AwaitFinished(absl::Seconds(5)));
  sends.Close(absl::Seconds(1));
  EXPECT_EQ(link_.abandoned(), 0);
}

TEST_F(SendQueueOverAPostingLink, AFailedSendFailsThePipelineWithItsCauseAndCancelsTheExchange) {
  SendQueue sends(exchange_, progress_);
  sends.Post(Segment(0, payload_));
  link_.Complete(0, absl::UnavailableError("the ring stream to rank 1 ended"));
  EXPECT_THAT(progress_.failure().message(), ::testing::HasSubstr("the ring stream to rank 1 ended"));
  EXPECT_THAT(progress_.failure().message(), ::testing::HasSubstr("sending step 0 segment 0 to rank 1"));
  EXPECT_TRUE(exchange_.limit().IsCancelled()) << "the receiving side would not wake up";
  // A segment posted after the failure is not sent at all.
  sends.Post(Segment(1, payload_));
  EXPECT_THAT(link_.posted_segments(), ::testing::ElementsAre(0));
  EXPECT_TRUE(sends.AwaitFinished(absl::Seconds(5)));
}

TEST_F(SendQueueOverAPostingLink, CloseGivesUpSendsStillOutAfterTheGraceAndReturnsOnceAllReported) {
  SendQueue sends(exchange_, progress_);
  sends.Post(Segment(0, payload_));
  sends.Post(Segment(1, payload_));
  link_.Complete(0, absl::OkStatus());
  const SteadyStopwatch start;
  sends.Close(absl::Milliseconds(50));
  EXPECT_GE(start.Elapsed(), absl::Milliseconds(50));
  EXPECT_EQ(link_.abandoned(), 1);
  EXPECT_TRUE(sends.AwaitFinished(absl::ZeroDuration()));
  EXPECT_THAT(progress_.failure().message(), ::testing::HasSubstr("abandoned"));
}

TEST(SendQueueOverAWaitingLink, ItsOwnThreadSendsInPostOrderAndTheReceiverGetsThem) {
  MemoryRing ring(2, /*capacity_frames=*/1);
  RingExchange exchange(RingMember{0, 2, 1}, ring.link(0), Spec(), RingOptions{});
  PipelineProgress progress;
  std::vector<std::vector<std::byte>> payloads;
  for (int j = 0; j < 4; ++j) payloads.emplace_back(64, static_cast<std::byte>(j));
  SendQueue sends(exchange, progress);
  // The link holds one frame: posting never waits, the queue's thread does.
  for (int j = 0; j < 4; ++j) sends.Post(Segment(j, payloads[j]));
  for (int j = 0; j < 4; ++j) {
    absl::StatusOr<ReceivedFrame> got =
        ring.link(1).Receive(WaitLimit{SteadyDeadline(absl::Seconds(10)), nullptr});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->frame.segment, static_cast<uint32_t>(j));
    EXPECT_EQ(got->payload.ToVector(), payloads[j]);
  }
  EXPECT_TRUE(sends.AwaitFinished(absl::Seconds(10)));
  EXPECT_TRUE(progress.AwaitSent(4, WaitLimit{SteadyDeadline(absl::Seconds(1)), nullptr}).ok());
  sends.Close(absl::Seconds(1));
}

}  // namespace
}  // namespace ringsync
