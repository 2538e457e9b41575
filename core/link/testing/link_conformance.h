// The Link contract (core/link/link.h) as a test suite every Link implementation runs:
// include this header in the implementation's test and instantiate LinkConformance with
// a factory of LinkPairs, e.g.
//
//   INSTANTIATE_TEST_SUITE_P(Memory, LinkConformance, ::testing::Values(&MakeMemoryPair));
//
// What a bounded queue does when full is each implementation's own test: the gRPC link's
// bound is the HTTP/2 window, far larger than a unit test should fill.
#pragma once

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/link/link.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::testing {

// Two ranks joined by the Link under test: sender() sends to the rank whose receiver()
// receives.
class LinkPair {
 public:
  virtual ~LinkPair() = default;
  virtual Link& sender() = 0;
  virtual Link& receiver() = 0;
};

using LinkPairFactory = std::unique_ptr<LinkPair> (*)();

class LinkConformance : public ::testing::TestWithParam<LinkPairFactory> {
 protected:
  void SetUp() override { pair_ = GetParam()(); }

  static WaitLimit In(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }
  static std::vector<std::byte> Pattern(size_t size, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> bytes(size);
    for (std::byte& b : bytes) b = static_cast<std::byte>(rng());
    return bytes;
  }
  static std::vector<std::byte> Copy(const ReceivedFrame& received) {
    return received.payload.ToVector();
  }

  std::unique_ptr<LinkPair> pair_;
};

// The outcomes of posted sends (Link::PostSend), for the tests of links that post.
class PostedOutcomes {
 public:
  SendDone Expect(size_t index) {
    {
      absl::MutexLock lock(&mu_);
      if (outcomes_.size() <= index) outcomes_.resize(index + 1);
      ++expected_;
    }
    return [this, index](absl::Status outcome) {
      absl::MutexLock lock(&mu_);
      EXPECT_FALSE(outcomes_[index].has_value()) << "send " << index << " reported twice";
      outcomes_[index] = std::move(outcome);
      ++reported_;
    };
  }
  // Every expected outcome, once all are in (empty if they were not within `wait`).
  std::vector<absl::Status> AwaitAll(absl::Duration wait) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return reported_ == expected_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all), wait)) return {};
    std::vector<absl::Status> out;
    for (const std::optional<absl::Status>& o : outcomes_) out.push_back(o.value_or(absl::OkStatus()));
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::optional<absl::Status>> outcomes_ ABSL_GUARDED_BY(mu_);
  size_t expected_ ABSL_GUARDED_BY(mu_) = 0;
  size_t reported_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_P(LinkConformance, CarriesEveryHeaderFieldAndTheSpec) {
  Frame frame;
  frame.kind = FrameKind::kSegment;
  frame.sender_rank = 3;
  frame.generation = 7;
  frame.sequence = 9;  // a link's first frames start near 1 (the gRPC link fences jumps)
  frame.step = 5;
  frame.segment = 6;
  frame.chunk = 2;
  frame.offset = 1ull << 33;
  frame.count = 4;
  CollectiveSpec spec;
  spec.name = "grad/fc1";
  spec.sequence = frame.sequence;
  spec.dtype = DType::kBFloat16;
  spec.op = ReduceOp::kMax;
  spec.count = 1000;
  frame.spec = spec;
  const std::vector<std::byte> payload = Pattern(16, 1);
  ASSERT_TRUE(pair_->sender().Send(frame, payload, In(absl::Seconds(10))).ok());

  absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  const Frame& f = got->frame;
  EXPECT_EQ(f.kind, FrameKind::kSegment);
  EXPECT_EQ(f.generation, 7u);
  EXPECT_EQ(f.sequence, frame.sequence);
  EXPECT_EQ(f.step, 5u);
  EXPECT_EQ(f.segment, 6u);
  EXPECT_EQ(f.chunk, 2u);
  EXPECT_EQ(f.offset, frame.offset);
  EXPECT_EQ(f.count, 4u);
  ASSERT_TRUE(f.spec.has_value());
  EXPECT_EQ(f.spec->name, "grad/fc1");
  EXPECT_EQ(f.spec->dtype, DType::kBFloat16);
  EXPECT_EQ(f.spec->op, ReduceOp::kMax);
  EXPECT_EQ(f.spec->count, 1000u);
  EXPECT_EQ(Copy(*got), payload);
}

TEST_P(LinkConformance, CarriesAnAbortWithItsOriginAndReason) {
  Frame abort;
  abort.kind = FrameKind::kAbort;
  abort.sequence = 9;
  abort.abort_origin = 2;
  abort.abort_reason = "rank 2 gave up: its client left";
  ASSERT_TRUE(pair_->sender().Send(abort, {}, In(absl::Seconds(10))).ok());
  absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->frame.kind, FrameKind::kAbort);
  EXPECT_EQ(got->frame.abort_origin, 2);
  EXPECT_EQ(got->frame.abort_reason, "rank 2 gave up: its client left");
}

TEST_P(LinkConformance, DeliversManyFramesOfManySizesInOrderAndIntact) {
  const std::vector<size_t> sizes = {0, 1, 7, 4096, 65537, 1 << 20, 3, 300000};
  std::jthread sender([&] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Frame frame;
      frame.segment = static_cast<uint32_t>(i);
      const std::vector<std::byte> payload = Pattern(sizes[i], static_cast<uint32_t>(i));
      ASSERT_TRUE(pair_->sender().Send(frame, payload, In(absl::Seconds(20))).ok());
    }
  });
  for (size_t i = 0; i < sizes.size(); ++i) {
    absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(20)));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->frame.segment, i);
    EXPECT_EQ(Copy(*got), Pattern(sizes[i], static_cast<uint32_t>(i))) << "frame " << i;
  }
}

TEST_P(LinkConformance, ThePayloadMayBeReusedOnceSendReturns) {
  std::vector<std::byte> buffer = Pattern(64 * 1024, 3);
  const std::vector<std::byte> sent = buffer;
  ASSERT_TRUE(pair_->sender().Send(Frame{}, buffer, In(absl::Seconds(10))).ok());
  std::fill(buffer.begin(), buffer.end(), std::byte{0});
  absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Copy(*got), sent);
}

TEST_P(LinkConformance, PeekShowsTheNextFrameWithoutTakingIt) {
  Frame frame;
  frame.step = 11;
  ASSERT_TRUE(pair_->sender().Send(frame, {}, In(absl::Seconds(10))).ok());
  absl::StatusOr<Frame> peeked = pair_->receiver().Peek(In(absl::Seconds(10)));
  ASSERT_TRUE(peeked.ok()) << peeked.status();
  EXPECT_EQ(peeked->step, 11u);
  absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->frame.step, 11u);
}

TEST_P(LinkConformance, AnAbortBehindOtherFramesIsSeenBeforeItIsReceived) {
  Frame segment;
  segment.sequence = 4;
  Frame abort;
  abort.kind = FrameKind::kAbort;
  abort.sequence = 5;
  ASSERT_TRUE(pair_->sender().Send(segment, {}, In(absl::Seconds(10))).ok());
  ASSERT_TRUE(pair_->sender().Send(abort, {}, In(absl::Seconds(10))).ok());
  // Arrival is asynchronous on a network link: wait for the receiver to have both.
  const SteadyDeadline deadline(absl::Seconds(10));
  while (pair_->receiver().newest_aborted_sequence() < 5 && !deadline.Passed()) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(pair_->receiver().newest_aborted_sequence(), 5u);
  EXPECT_EQ(pair_->receiver().Receive(In(absl::Seconds(10)))->frame.sequence, 4u);
}

TEST_P(LinkConformance, ReceiveEndsAtItsDeadlineWhenNothingArrives) {
  const SteadyStopwatch start;
  absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Milliseconds(50)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_GE(start.Elapsed(), absl::Milliseconds(50));
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
}

TEST_P(LinkConformance, ReceiveEndsSoonAfterCancellation) {
  Cancellation cancellation;
  std::jthread canceller([&] {
    absl::SleepFor(absl::Milliseconds(20));
    cancellation.Cancel(absl::CancelledError("test"));
  });
  const SteadyStopwatch start;
  absl::StatusOr<ReceivedFrame> got =
      pair_->receiver().Receive(WaitLimit{SteadyDeadline(absl::Seconds(30)), &cancellation});
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
}

TEST_P(LinkConformance, PostedFramesGoOutInOrderWithSentOnesAndEachReportsOnce) {
  if (!pair_->sender().posts_sends()) GTEST_SKIP() << "this link does not post sends";
  const std::vector<size_t> sizes = {1 << 20, 0, 70000, 5, 300000};
  std::vector<std::vector<std::byte>> payloads;
  for (size_t i = 0; i < sizes.size(); ++i) payloads.push_back(Pattern(sizes[i], static_cast<uint32_t>(i)));
  PostedOutcomes outcomes;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Frame frame;
    frame.sequence = 1;
    frame.segment = static_cast<uint32_t>(i);
    if (i == 3) {  // a frame sent the waiting way keeps its place among posted ones
      ASSERT_TRUE(pair_->sender().Send(frame, payloads[i], In(absl::Seconds(10))).ok());
      continue;
    }
    pair_->sender().PostSend(frame, payloads[i], In(absl::Seconds(10)), outcomes.Expect(i));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(20)));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->frame.segment, i);
    EXPECT_EQ(Copy(*got), payloads[i]) << "frame " << i;
  }
  const std::vector<absl::Status> reported = outcomes.AwaitAll(absl::Seconds(10));
  ASSERT_EQ(reported.size(), sizes.size()) << "a posted send never reported";
  for (const absl::Status& s : reported) EXPECT_TRUE(s.ok()) << s;
}

TEST_P(LinkConformance, AbandonedPostedSendsAllReportAndTheNextCollectiveGoesThrough) {
  if (!pair_->sender().posts_sends()) GTEST_SKIP() << "this link does not post sends";
  // More than the transport's windows hold while the receiver does not read: some of
  // these are still out when they are given up.
  constexpr size_t kFrames = 64;
  const std::vector<std::byte> payload = Pattern(1 << 20, 9);
  PostedOutcomes outcomes;
  for (size_t i = 0; i < kFrames; ++i) {
    Frame frame;
    frame.sequence = 1;
    frame.segment = static_cast<uint32_t>(i);
    pair_->sender().PostSend(frame, payload, In(absl::Seconds(10)), outcomes.Expect(i));
  }
  pair_->sender().AbandonPostedSends();
  const std::vector<absl::Status> reported = outcomes.AwaitAll(absl::Seconds(10));
  ASSERT_EQ(reported.size(), kFrames) << "an abandoned send never reported";
  EXPECT_FALSE(reported.back().ok()) << "the last frame went out although nobody read";
  // The next collective is sent on (a reconnected) link and arrives, after whatever of
  // the abandoned one did.
  Frame next;
  next.sequence = 2;
  ASSERT_TRUE(pair_->sender().Send(next, payload, In(absl::Seconds(10))).ok());
  while (true) {
    absl::StatusOr<ReceivedFrame> got = pair_->receiver().Receive(In(absl::Seconds(20)));
    ASSERT_TRUE(got.ok()) << got.status();
    if (got->frame.sequence == 2) break;
  }
}

}  // namespace ringsync::testing
