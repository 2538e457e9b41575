// ClassifyFailure: each cause from the messages the ring and the worker really write.
#include "daemon/worker/failure_cause.h"

#include "gtest/gtest.h"

namespace ringsync {
namespace {

struct Case {
  absl::Status status;
  FailureCause cause;
};

TEST(ClassifyFailure, NamesTheCauseOfEachKnownMessage) {
  const Case cases[] = {
      {absl::FailedPreconditionError(
           "rank 2 (generation 3, collective #17 'grad/fc1'): collective #17 'grad/fc1': rank 2 "
           "has allreduce 1000 x float32 sum, rank 1 has allreduce 1024 x float32 sum; every rank "
           "must pass the same count, dtype, op and root"),
       FailureCause::kMismatch},
      {absl::FailedPreconditionError("ranks called different collectives: rank 1 is at ..."),
       FailureCause::kMismatch},
      {absl::DeadlineExceededError(
           "rank 0 (generation 1, collective #3 'x'): waiting for step 0 segment 0 from rank 3: "
           "timed out"),
       FailureCause::kTimeout},
      {absl::AbortedError("rank 1 gave up: waiting for step 2 segment 0 from rank 0: timed out"),
       FailureCause::kTimeout},
      {absl::UnavailableError("sending step 1 segment 0 to rank 3: the ring stream to rank 3 "
                              "(worker w3 at 127.0.0.1:4000) ended: connection lost"),
       FailureCause::kPeerLost},
      {absl::AbortedError("generation 3 ended: the ring dissolved: worker w3 (rank 3) missed "
                          "heartbeats for 5s"),
       FailureCause::kPeerLost},
      {absl::DeadlineExceededError(
           "collective 'x' (client collective 4): no ring to run on: waiting for the ring: timed "
           "out (the ring dissolved (generation 4): worker w1 (rank 1) closed its WatchRing "
           "stream)"),
       FailureCause::kPeerLost},
      {absl::FailedPreconditionError(
           "rank 3 (worker w3) has no training process attached: the client went away"),
       FailureCause::kClientGone},
      {absl::AbortedError("rank 3 gave up: the training process attached to worker w3 "
                          "disconnected during the collective"),
       FailureCause::kClientGone},
      {absl::AbortedError("generation 4 ended: generation 5 replaced it"),
       FailureCause::kGenerationChanged},
      {absl::FailedPreconditionError("rank 1 sent a frame of generation 5 but this rank is in "
                                     "generation 4; the ring changed under it"),
       FailureCause::kGenerationChanged},
      {absl::InvalidArgumentError("frame from rank 1 carries 12 bytes for 4 x float32"),
       FailureCause::kInvalid},
      {absl::UnavailableError("the worker is shutting down"), FailureCause::kOther},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FailureCauseName(ClassifyFailure(c.status)), FailureCauseName(c.cause)) << c.status;
  }
}

TEST(FailureCauseName, IsTheMetricsVocabulary) {
  EXPECT_EQ(FailureCauseName(FailureCause::kMismatch), "mismatch");
  EXPECT_EQ(FailureCauseName(FailureCause::kTimeout), "timeout");
  EXPECT_EQ(FailureCauseName(FailureCause::kPeerLost), "peer_lost");
  EXPECT_EQ(FailureCauseName(FailureCause::kClientGone), "client_gone");
  EXPECT_EQ(FailureCauseName(FailureCause::kGenerationChanged), "generation_changed");
  EXPECT_EQ(FailureCauseName(FailureCause::kInvalid), "invalid");
  EXPECT_EQ(FailureCauseName(FailureCause::kOther), "other");
}

}  // namespace
}  // namespace ringsync
