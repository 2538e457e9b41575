// Specification of a ring all-reduce over links that misbehave, one scripted fault at a
// time (FaultyLink): a lost, misplaced, stalled or refused frame fails every rank within
// the deadline with the cause named; a delay inside the deadline changes nothing.
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/ring_allreduce.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;

constexpr int kRanks = 4;
constexpr size_t kCount = 4096;  // 16 KiB of float32: 16 segments of 256 B per chunk step

struct Outcome {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  absl::Duration elapsed;
};

// One float32 SUM all-reduce on kRanks ranks; rank `faulty_rank` sends through a
// FaultyLink with `script` (send index -> fault).
Outcome RunWith(int faulty_rank, const std::vector<std::pair<uint64_t, LinkFault>>& script,
                absl::Duration timeout = absl::Seconds(2)) {
  MemoryRing ring(kRanks);
  FaultyLink faulty(ring.link(faulty_rank));
  for (const auto& [index, fault] : script) faulty.Script(index, fault);
  RingOptions options;
  options.timeout = timeout;
  options.segment_bytes = 256;
  options.abort_notice_timeout = absl::Milliseconds(200);
  CollectiveSpec spec;
  spec.name = "grad/fc1";
  spec.sequence = 17;
  spec.count = kCount;
  Outcome outcome;
  for (int r = 0; r < kRanks; ++r) {
    outcome.buffers.push_back(testing::ExactInput(DType::kFloat32, ReduceOp::kSum, kCount, r, 9));
  }
  const SteadyStopwatch start;
  outcome.statuses = SpawnRanks(kRanks, [&](int r) {
    CpuReducer reducer;
    Link& link = r == faulty_rank ? static_cast<Link&>(faulty) : ring.link(r);
    return RingAllReduce(RingMember{r, kRanks, 3}, link, reducer, spec,
                         absl::MakeSpan(outcome.buffers[static_cast<size_t>(r)]), options);
  });
  outcome.elapsed = start.Elapsed();
  return outcome;
}

void ExpectEveryRankFailedNaming(const Outcome& outcome, absl::string_view cause) {
  for (int r = 0; r < kRanks; ++r) {
    const absl::Status& s = outcome.statuses[static_cast<size_t>(r)];
    EXPECT_FALSE(s.ok()) << "rank " << r;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17 'grad/fc1')")))
        << s;
  }
  bool named = false;
  for (const absl::Status& s : outcome.statuses) {
    named = named || absl::StrContains(s.message(), cause);
  }
  EXPECT_TRUE(named) << "no rank names the cause '" << cause << "'";
}

TEST(RingLinkFaults, ADelayInsideTheDeadlineChangesNothing) {
  const Outcome clean = RunWith(1, {});
  const Outcome delayed = RunWith(1, {{0, LinkFault::Delay(absl::Milliseconds(30))},
                                      {7, LinkFault::Delay(absl::Milliseconds(30))},
                                      {40, LinkFault::Delay(absl::Milliseconds(30))}});
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(delayed.statuses[static_cast<size_t>(r)].ok()) << delayed.statuses[r];
    EXPECT_TRUE(delayed.buffers[static_cast<size_t>(r)] == clean.buffers[0]) << "rank " << r;
  }
}

TEST(RingLinkFaults, ALostSegmentFailsEveryRankNamingTheRankItCameFrom) {
  // Noticed when the next segment arrives out of place (or, for the last one, at the
  // deadline of the wait for it).
  const Outcome outcome = RunWith(1, {{3, LinkFault::Drop()}}, absl::Milliseconds(500));
  ExpectEveryRankFailedNaming(outcome, "from rank 1");
  EXPECT_LT(outcome.elapsed, absl::Seconds(3));
}

TEST(RingLinkFaults, AMisplacedSegmentIsRefusedAtOnceByItsReceiver) {
  const Outcome outcome = RunWith(0, {{2, LinkFault::Corrupt()}}, absl::Seconds(30));
  ExpectEveryRankFailedNaming(outcome, "rank 0");
  // Refused on arrival, not waited out.
  EXPECT_LT(outcome.elapsed, absl::Seconds(10));
}

TEST(RingLinkFaults, AClosedLinkFailsItsSenderAtOnceAndTheOthersByTheDeadline) {
  // The closed link is also the only way to tell rank 3's right neighbour, so the rest of
  // the ring learns of it only when its waits end.
  const Outcome outcome = RunWith(3, {{5, LinkFault::Close()}}, absl::Milliseconds(500));
  EXPECT_THAT(std::string(outcome.statuses[3].message()), HasSubstr("closed by fault injection"));
  ExpectEveryRankFailedNaming(outcome, "closed by fault injection");
  EXPECT_LT(outcome.elapsed, absl::Seconds(3));
}

TEST(RingLinkFaults, AStalledSendIsEndedByTheDeadlineOnEveryRank) {
  const Outcome outcome = RunWith(2, {{0, LinkFault::Stall()}}, absl::Milliseconds(500));
  ExpectEveryRankFailedNaming(outcome, "rank 2");
  EXPECT_LT(outcome.elapsed, absl::Seconds(3));
}

}  // namespace
}  // namespace ringsync
