// The frame stamp and failure texts that the ring's exchange and the doubling share.
#include "core/ring/rank_messages.h"

#include "gtest/gtest.h"

namespace ringsync {
namespace {

CollectiveSpec Spec() {
  CollectiveSpec spec;
  spec.sequence = 7;
  spec.name = "grad";
  return spec;
}

TEST(RankMessages, AStampedFrameNamesItsSenderGenerationCollectiveAndPlace) {
  const Frame f = StampedFrame(FrameKind::kCommit, RingMember{2, 5, 9}, 7, 3, 4, 1);
  EXPECT_EQ(f.kind, FrameKind::kCommit);
  EXPECT_EQ(f.sender_rank, 2);
  EXPECT_EQ(f.generation, 9u);
  EXPECT_EQ(f.sequence, 7u);
  EXPECT_EQ(f.step, 3u);
  EXPECT_EQ(f.segment, 4u);
  EXPECT_EQ(f.chunk, 1u);
  EXPECT_EQ(f.offset, 0u);
  EXPECT_EQ(f.count, 0u);
}

TEST(RankMessages, AFailureIsPrefixedWithRankGenerationAndCollectiveKeepingItsCode) {
  const absl::Status s = AnnotateRankFailure(absl::UnavailableError("link lost"),
                                             RingMember{1, 4, 3}, Spec());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "rank 1 (generation 3, " + DescribeCollective(Spec()) + "): link lost");
}

TEST(RankMessages, AnAlgorithmOtherThanTheRingIsNamedAfterTheCollective) {
  const absl::Status s = AnnotateRankFailure(absl::AbortedError("x"), RingMember{0, 4, 3}, Spec(),
                                             "doubling");
  EXPECT_EQ(s.message(), "rank 0 (generation 3, " + DescribeCollective(Spec()) + ", doubling): x");
}

TEST(RankMessages, OkStaysOk) {
  EXPECT_TRUE(AnnotateRankFailure(absl::OkStatus(), RingMember{}, Spec()).ok());
}

TEST(RankMessages, ACancelIsExplainedByTheCallersReasonWhenItHasOne) {
  Cancellation caller;
  EXPECT_EQ(ExplainCancel(absl::CancelledError("cancelled"), &caller).message(), "cancelled");
  EXPECT_EQ(ExplainCancel(absl::CancelledError("cancelled"), nullptr).message(), "cancelled");
  caller.Cancel(absl::UnavailableError("the training process disconnected"));
  const absl::Status s = ExplainCancel(absl::CancelledError("cancelled"), &caller);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "the training process disconnected");
  // Any other failure is its own explanation.
  EXPECT_EQ(ExplainCancel(absl::DeadlineExceededError("late"), &caller).message(), "late");
}

}  // namespace
}  // namespace ringsync
