// Specification of the outcome decision (RingExchange::Commit): whatever frame a broken
// link loses, a collective is OK on every rank or failed on every rank — except that a
// break during the commit pass may leave some ranks OK and the others failed *in doubt*
// (OutcomeMark::kInDoubt). Never OK on one rank and a plain failure on another.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/outcome.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/ring_allgather.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/rank_messages.h"
#include "core/ring/ring_broadcast.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_gather.h"
#include "core/ring/ring_scatter.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Bytes;

constexpr int kRanks = 4;
constexpr size_t kCount = 64;  // one segment per chunk: every send is a distinct cut point

struct CutRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  uint64_t faulty_sends = 0;  // sends the faulty rank attempted
};

CollectiveSpec Spec(CollectiveKind kind) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.name = "step/grad";
  spec.sequence = 17;
  spec.dtype = DType::kFloat32;
  spec.count = kind == CollectiveKind::kBarrier ? 0 : kCount;
  spec.root = 2;
  return spec;
}

// One collective of `kind` on kRanks ranks; rank `faulty_rank` sends through a FaultyLink
// whose send number `cut` (if any) suffers `fault`.
CutRun RunCut(CollectiveKind kind, int faulty_rank, std::optional<uint64_t> cut, LinkFault fault) {
  MemoryRing ring(kRanks);
  FaultyLink faulty(ring.link(faulty_rank));
  if (cut.has_value()) faulty.Script(*cut, fault);
  RingOptions options;
  options.timeout = absl::Milliseconds(300);
  options.abort_notice_timeout = absl::Milliseconds(100);
  options.segment_bytes = 1 << 20;
  const CollectiveSpec spec = Spec(kind);
  CutRun run;
  for (int r = 0; r < kRanks; ++r) {
    const size_t elements = TraitsOf(kind).gathers ? kCount * kRanks : spec.count;
    Bytes buffer = testing::ExactInput(DType::kFloat32, ReduceOp::kSum, elements, r, 5);
    run.buffers.push_back(std::move(buffer));
  }
  run.statuses = SpawnRanks(kRanks, [&](int r) {
    CpuReducer reducer;
    Link& link = r == faulty_rank ? static_cast<Link&>(faulty) : ring.link(r);
    const RingMember me{r, kRanks, 3};
    absl::Span<std::byte> buffer = absl::MakeSpan(run.buffers[static_cast<size_t>(r)]);
    switch (kind) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kBarrier:
        return RingAllReduce(me, link, reducer, spec, buffer, options);
      case CollectiveKind::kBroadcast: return RingBroadcast(me, link, spec, buffer, options);
      case CollectiveKind::kScatter: return RingScatter(me, link, spec, buffer, options);
      case CollectiveKind::kAllGather: return RingAllGather(me, link, spec, buffer, options);
      case CollectiveKind::kGather: return RingGatherFromFirstSlot(me, link, spec, buffer, options);
      case CollectiveKind::kReduceScatter:
        return RingReduceScatter(me, link, reducer, spec, buffer, options);
      case CollectiveKind::kAllToAll: break;  // none on the ring: direct_transfer_test.cc
    }
    return absl::InternalError("unknown kind");
  });
  run.faulty_sends = faulty.sends();
  return run;
}

bool IsInDoubt(const absl::Status& s) { return OutcomeMarkOf(s) == OutcomeMark::kInDoubt; }

bool IsPlainFailure(const absl::Status& s) {
  return !s.ok() && OutcomeMarkOf(s) != OutcomeMark::kInDoubt;
}

// The property this file specifies; `clean` is the fault-free run whose buffers OK ranks
// must match.
void ExpectOneSharedOutcome(const CutRun& run, const CutRun& clean) {
  bool any_ok = false, any_plain = false;
  for (int r = 0; r < kRanks; ++r) {
    const absl::Status& s = run.statuses[static_cast<size_t>(r)];
    any_ok = any_ok || s.ok();
    any_plain = any_plain || IsPlainFailure(s);
    if (s.ok()) {
      EXPECT_TRUE(run.buffers[static_cast<size_t>(r)] == clean.buffers[static_cast<size_t>(r)])
          << "rank " << r << " returned OK with a wrong result";
    } else {
      EXPECT_THAT(std::string(s.message()),
                  HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17 'step/grad')")))
          << s;
    }
  }
  if (any_ok) {
    EXPECT_FALSE(any_plain) << "OK on one rank and a plain failure on another:\n"
                            << run.statuses[0] << "\n" << run.statuses[1] << "\n"
                            << run.statuses[2] << "\n" << run.statuses[3];
  }
}

class RingCommit : public ::testing::TestWithParam<CollectiveKind> {};

TEST_P(RingCommit, ALinkCutAtAnyFrameNeverLeavesOneRankOkAndAnotherPlainlyFailed) {
  const CollectiveKind kind = GetParam();
  const CutRun clean = RunCut(kind, 1, std::nullopt, LinkFault::Drop());
  for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << s;
  int in_doubt = 0;
  for (uint64_t cut = 0; cut < clean.faulty_sends; ++cut) {
    for (LinkFault fault : {LinkFault::Drop(), LinkFault::Close()}) {
      SCOPED_TRACE(absl::StrCat(CollectiveKindName(kind), ": send ", cut, " of rank 1 ",
                                fault.kind == LinkFault::Kind::kDrop ? "lost" : "closes the link"));
      const CutRun run = RunCut(kind, 1, cut, fault);
      ExpectOneSharedOutcome(run, clean);
      for (const absl::Status& s : run.statuses) in_doubt += IsInDoubt(s) ? 1 : 0;
    }
  }
  // The cuts inside the commit pass do reach the one case no protocol can close.
  EXPECT_GT(in_doubt, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryKind, RingCommit,
                         ::testing::Values(CollectiveKind::kAllReduce, CollectiveKind::kBroadcast,
                                           CollectiveKind::kAllGather, CollectiveKind::kBarrier,
                                           CollectiveKind::kReduceScatter,
                                           CollectiveKind::kScatter, CollectiveKind::kGather),
                         [](const auto& info) { return std::string(CollectiveKindName(info.param)); });

TEST(RingCommitOutcome, LosingTheLastCommitFrameLeavesItsReceiverInDoubtNamingTheRankItMissed) {
  // Rank 1's last send is its step-2 commit frame, which tells rank 2 that rank 3 (1 - 2
  // around the ring) completed. Every other rank hears all four commits and returns OK;
  // rank 2 cannot know whether they did.
  const CutRun clean = RunCut(CollectiveKind::kAllReduce, 1, std::nullopt, LinkFault::Drop());
  const CutRun run = RunCut(CollectiveKind::kAllReduce, 1, clean.faulty_sends - 1, LinkFault::Drop());
  for (int r : {0, 1, 3}) EXPECT_TRUE(run.statuses[static_cast<size_t>(r)].ok()) << run.statuses[r];
  const absl::Status& doubt = run.statuses[2];
  EXPECT_EQ(OutcomeMarkOf(doubt), OutcomeMark::kInDoubt) << doubt;
  EXPECT_THAT(std::string(doubt.message()),
              AllOf(HasSubstr("rank 2 (generation 3, collective #17 'step/grad')"),
                    HasSubstr("outcome in doubt"), HasSubstr("rank(s) 3 completed"),
                    HasSubstr("waiting for commit step 2 from rank 1")));
}

TEST(RingCommitOutcome, ARankThatFailsBeforeItsDataCompletedMakesEveryRankFailPlainly) {
  // Rank 1's last data frame (send 8: three agreement frames, then six data steps) is
  // lost: ranks 0, 1 and 3 complete their data and start the commit pass, rank 2 never
  // completes its own. Its abort says so, which proves no rank can return OK, so even
  // the ranks in their commit pass fail plainly rather than in doubt.
  const CutRun run = RunCut(CollectiveKind::kAllReduce, 1, 8, LinkFault::Drop());
  for (const absl::Status& s : run.statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(OutcomeMarkOf(s), OutcomeMark::kNone) << s;
  }
  EXPECT_THAT(std::string(run.statuses[0].message()), HasSubstr("rank 2 gave up"));
}

TEST(RingCommitOutcome, AFailureBeforeAnyRankCompletedItsDataIsPlainOnEveryRank) {
  // The first agreement frame of rank 1 is lost: no rank gets near its data, let alone
  // the commit pass, so nobody is in doubt.
  const CutRun run = RunCut(CollectiveKind::kAllReduce, 1, 0, LinkFault::Drop());
  for (const absl::Status& s : run.statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(OutcomeMarkOf(s), OutcomeMark::kNone) << s;
  }
}

TEST(RingCommitOutcome, ACommitSendToARankThatStoppedReadingEndsWithTheRingsAbort) {
  // Rank 1 failed mid-data (its trainer went away) and stopped reading: rank 0's channel
  // to it is full, so rank 0's commit frame cannot go out. Rank 1's abort reaches rank 0
  // the other way round the ring. Rank 0 ends with that cause at once — not, as it did,
  // in doubt at its deadline 20 s later.
  MemoryRing ring(2, /*capacity_frames=*/1);
  const CollectiveSpec spec = Spec(CollectiveKind::kBarrier);
  const RingMember rank0{0, 2, 3};
  Frame unread = StampedFrame(FrameKind::kSegment, rank0, spec.sequence, 0, 0, 0);
  ASSERT_TRUE(ring.link(0).Send(unread, {}, WaitLimit{SteadyDeadline(absl::Seconds(1))}).ok());
  std::jthread rank1([&] {
    absl::SleepFor(absl::Milliseconds(100));  // rank 0 is waiting to send by then
    Frame abort = StampedFrame(FrameKind::kAbort, RingMember{1, 2, 3}, spec.sequence, 0, 0, 0);
    abort.abort_origin = 1;
    abort.abort_reason = "the trainer went away";
    abort.abort_before_commit = true;
    EXPECT_TRUE(ring.link(1).Send(abort, {}, WaitLimit{SteadyDeadline(absl::Seconds(1))}).ok());
  });
  RingOptions options;
  options.timeout = absl::Seconds(20);
  options.abort_notice_timeout = absl::Milliseconds(100);
  const SteadyStopwatch start;
  RingExchange exchange(rank0, ring.link(0), spec, options);
  const absl::Status s = exchange.Commit();
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_EQ(OutcomeMarkOf(s), OutcomeMark::kNone) << s;  // rank 1 never completed its data
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1 gave up: the trainer went away"));
}

}  // namespace
}  // namespace ringsync
