// RingMembership: which views change the membership a training loop's state belongs to.
#include "daemon/worker/ring_membership.h"

#include <string>
#include <vector>

#include "core/outcome.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::RingView Formed(uint64_t generation, const std::vector<std::string>& workers) {
  v1::RingView view;
  view.set_generation(generation);
  for (const std::string& w : workers) {
    v1::RingMember* m = view.add_members();
    m->set_worker_id(w);
    m->set_peer_address(w + ":1");
  }
  return view;
}

v1::RingView Dissolved(uint64_t generation, const std::string& reason) {
  v1::RingView view;
  view.set_generation(generation);
  view.set_dissolved_reason(reason);
  return view;
}

TEST(RingMembership, TheFirstRingIsNoChangeForATrainingProcessThatHasNothingToResync) {
  RingMembership membership;
  EXPECT_FALSE(membership.OnView(Formed(3, {"w0", "w1"}), 0));
  EXPECT_EQ(membership.snapshot().id, 0u);
  EXPECT_FALSE(membership.snapshot().last_change.has_value());
}

TEST(RingMembership, ANewGenerationWithTheSameWorkersIsTheSameMembership) {
  RingMembership membership;
  membership.OnView(Formed(3, {"w0", "w1"}), 0);
  EXPECT_FALSE(membership.OnView(Formed(4, {"w0", "w1"}), 0)) << "e.g. a restarted coordinator";
  EXPECT_EQ(membership.snapshot().id, 0u);
}

TEST(RingMembership, AnEvictionOrAnAdmissionChangesItNamingWhoLeftAndJoined) {
  RingMembership membership;
  membership.OnView(Formed(3, {"w0", "w1", "w2", "w3"}), 0);
  EXPECT_TRUE(membership.OnView(Formed(5, {"w0", "w1", "w3"}), 0));
  EXPECT_EQ(membership.snapshot().id, 5u);
  MembershipChange change = *membership.snapshot().last_change;
  EXPECT_EQ(change.from_generation, 3u);
  EXPECT_EQ(change.from_size, 4);
  EXPECT_EQ(change.to_size, 3);
  EXPECT_THAT(change.left, ElementsAre("w2"));
  EXPECT_EQ(change.Describe(), "generation 3 (4 workers) -> generation 5 (3 workers): w2 left");

  EXPECT_TRUE(membership.OnView(Formed(6, {"w0", "w1", "w3", "w4"}), 1));
  EXPECT_EQ(membership.snapshot().id, 6u);
  EXPECT_THAT(membership.snapshot().last_change->joined, ElementsAre("w4"));
}

TEST(RingMembership, ADissolutionBeginsAChangeThatTheReformedRingCompletes) {
  RingMembership membership;
  membership.OnView(Formed(3, {"w0", "w1", "w2"}), 0);
  EXPECT_TRUE(membership.OnView(Dissolved(4, "worker w2 (rank 2) missed heartbeats"), -1));
  EXPECT_EQ(membership.snapshot().id, 4u);
  EXPECT_THAT(membership.snapshot().last_change->Describe(),
              HasSubstr("generation 3 (3 workers) -> generation 4 (the ring dissolved"));
  EXPECT_FALSE(membership.OnView(Dissolved(5, "waiting for 3 workers"), -1));
  // The same workers again (w2 restarted, its state gone): the change that began at 4.
  EXPECT_FALSE(membership.OnView(Formed(6, {"w0", "w1", "w2"}), 0));
  EXPECT_EQ(membership.snapshot().id, 4u);
  EXPECT_THAT(membership.snapshot().last_change->Describe(),
              HasSubstr("generation 3 (3 workers) -> generation 6 (3 workers): the same workers"));
  EXPECT_THAT(membership.snapshot().last_change->Describe(), HasSubstr("missed heartbeats"));
}

TEST(RingMembership, MarksAFailureOfAnEarlierMembershipAndOnlyThat) {
  MembershipSnapshot now{5, MembershipChange{.from_generation = 3, .from_size = 4,
                                             .to_generation = 5, .to_size = 3, .left = {"w2"},
                                             .joined = {}, .reason = ""}};
  const absl::Status failed = absl::AbortedError("generation 3 ended");
  absl::Status marked = MarkIfMembershipChanged(failed, 0, now);
  EXPECT_EQ(OutcomeMarkOf(marked), OutcomeMark::kMembershipChanged);
  EXPECT_TRUE(absl::IsAborted(marked));
  EXPECT_THAT(std::string(marked.message()), HasSubstr("generation 3 ended; the ring's membership "
                                                       "changed: generation 3 (4 workers) -> "
                                                       "generation 5 (3 workers): w2 left"));
  EXPECT_EQ(OutcomeMarkOf(MarkIfMembershipChanged(failed, 5, now)), OutcomeMark::kNone);
  EXPECT_TRUE(MarkIfMembershipChanged(absl::OkStatus(), 0, now).ok());
}

TEST(RingMembership, AnInDoubtFailureKeepsItsMarkAndStillDescribesTheChange) {
  MembershipSnapshot now{5, MembershipChange{.from_generation = 3, .from_size = 4,
                                             .to_generation = 5, .to_size = 3, .left = {"w2"},
                                             .joined = {}, .reason = ""}};
  const absl::Status in_doubt =
      WithOutcomeMark(absl::AbortedError("outcome in doubt"), OutcomeMark::kInDoubt);
  absl::Status marked = MarkIfMembershipChanged(in_doubt, 0, now);
  EXPECT_EQ(OutcomeMarkOf(marked), OutcomeMark::kInDoubt);
  EXPECT_THAT(std::string(marked.message()), HasSubstr("w2 left"));
}

}  // namespace
}  // namespace ringsync
