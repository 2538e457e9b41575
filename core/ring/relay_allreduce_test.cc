// Specification of the relay all-reduce (the small-message algorithm) and of the rule
// that chooses it: N ranks as threads over in-memory links.
#include "core/ring/relay_allreduce.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/collective.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/outcome.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/allreduce_algorithm.h"
#include "core/ring/ring_allreduce.h"
#include "core/testing/dtype_op_params.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Bytes;
using testing::RandomInput;

CollectiveSpec Spec(DType dtype, ReduceOp op, size_t count) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.name = "step/grad";
  spec.sequence = 17;
  spec.dtype = dtype;
  spec.op = op;
  spec.count = count;
  return spec;
}

RingOptions ShortOptions() {
  RingOptions options;
  options.timeout = absl::Milliseconds(500);
  options.abort_notice_timeout = absl::Milliseconds(100);
  return options;
}

struct Outcome {
  std::vector<Bytes> buffers;
  std::vector<absl::Status> statuses;
};

// Every rank runs `algorithm_of(rank)` on its RandomInput; rank `faulty_rank` (if any)
// sends through a FaultyLink with `fault` scripted at send number `cut`.
Outcome RunAll(int n, const CollectiveSpec& spec, AllReduceAlgorithm (*algorithm_of)(int),
           std::optional<uint64_t> cut = std::nullopt, LinkFault fault = LinkFault::Drop(),
           uint64_t* faulty_sends = nullptr) {
  MemoryRing ring(n);
  FaultyLink faulty(ring.link(1 % n));
  if (cut.has_value()) faulty.Script(*cut, fault);
  Outcome run;
  for (int r = 0; r < n; ++r) run.buffers.push_back(RandomInput(spec.dtype, spec.count, r, 7));
  const RingOptions options = ShortOptions();
  run.statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    Link& link = r == 1 % n ? static_cast<Link&>(faulty) : ring.link(r);
    const RingMember me{r, n, 3};
    absl::Span<std::byte> buffer = absl::MakeSpan(run.buffers[static_cast<size_t>(r)]);
    return algorithm_of(r) == AllReduceAlgorithm::kRelay
               ? RelayAllReduce(me, link, reducer, spec, buffer, options)
               : RingAllReduce(me, link, reducer, spec, buffer, options);
  });
  if (faulty_sends != nullptr) *faulty_sends = faulty.sends();
  return run;
}

AllReduceAlgorithm AllRelay(int) { return AllReduceAlgorithm::kRelay; }
AllReduceAlgorithm AllRing(int) { return AllReduceAlgorithm::kRing; }
AllReduceAlgorithm RankZeroOnTheRing(int r) {
  return r == 0 ? AllReduceAlgorithm::kRing : AllReduceAlgorithm::kRelay;
}

class RelayNumerics : public ::testing::TestWithParam<testing::DTypeAndOp> {};

TEST_P(RelayNumerics, EveryRankGetsBitwiseTheRingsResult) {
  const auto [dtype, op] = GetParam();
  for (int n : {2, 3, 4, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{1001}}) {
      SCOPED_TRACE(absl::StrCat("N=", n, " count=", count));
      CollectiveSpec spec = Spec(dtype, op, count);
      if (IsFloatingPoint(dtype)) {  // the scale factors take the same path as the ring's
        spec.pre_scale = 0.5;
        spec.post_scale = 3.0;
      }
      const Outcome ring = RunAll(n, spec, AllRing);
      const Outcome relay = RunAll(n, spec, AllRelay);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(ring.statuses[r].ok()) << ring.statuses[r];
        ASSERT_TRUE(relay.statuses[r].ok()) << relay.statuses[r];
        EXPECT_TRUE(relay.buffers[r] == ring.buffers[r]) << "rank " << r << " differs from the ring";
        EXPECT_TRUE(relay.buffers[r] == relay.buffers[0]) << "rank " << r << " differs from rank 0";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDTypeAndOp, RelayNumerics, testing::EveryDTypeAndOp(),
                         testing::DTypeAndOpName);

TEST(RelayAllReduce, MismatchingSpecsFailOnEveryRankWithNoBufferTouched) {
  const int n = 4;
  MemoryRing ring(n);
  std::vector<Bytes> buffers;
  for (int r = 0; r < n; ++r) buffers.push_back(RandomInput(DType::kFloat32, 8, r, 7));
  const std::vector<Bytes> before = buffers;
  const std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 8);
    if (r == 2) spec.op = ReduceOp::kMax;
    return RelayAllReduce(RingMember{r, n, 3}, ring.link(r), reducer, spec,
                          absl::MakeSpan(buffers[r]), ShortOptions());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17 'step/grad')")));
    EXPECT_TRUE(buffers[r] == before[r]) << "rank " << r << "'s buffer was touched";
  }
}

TEST(RelayAllReduce, RanksThatChoseDifferentAlgorithmsAllFailNamingTheFlags) {
  const Outcome run = RunAll(4, Spec(DType::kFloat32, ReduceOp::kSum, 8), RankZeroOnTheRing);
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17 'step/grad')")));
  }
  // The ranks next to the disagreement say what it is; the others hear it in the abort.
  EXPECT_THAT(std::string(run.statuses[1].message()),
              AllOf(HasSubstr("different all-reduce algorithms"), HasSubstr("--algorithm")));
}

TEST(RelayAllReduce, RanksWhoseSizesDifferAndSoChoseDifferentAlgorithmsAllReportTheMismatch) {
  // A fused batch cut differently on one rank: it has fewer bytes and relays, the others
  // run the ring. Every rank still sees every spec and names the disagreement itself (a
  // fusing client puts its tensors back on exactly this error), no buffer touched.
  const int n = 4;
  MemoryRing ring(n);
  std::vector<Bytes> buffers;
  for (int r = 0; r < n; ++r) buffers.push_back(RandomInput(DType::kFloat32, r == 2 ? 4 : 8, r, 7));
  const std::vector<Bytes> before = buffers;
  std::vector<RingStats> stats(n);
  const std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, r == 2 ? 4 : 8);
    const RingMember me{r, n, 3};
    return r == 2 ? RelayAllReduce(me, ring.link(r), reducer, spec, absl::MakeSpan(buffers[r]),
                                   ShortOptions(), &stats[r])
                  : RingAllReduce(me, ring.link(r), reducer, spec, absl::MakeSpan(buffers[r]),
                                  ShortOptions(), &stats[r]);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(IsAgreementMismatch(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("rank 2 has allreduce 4 x float32"));
    EXPECT_TRUE(buffers[r] == before[r]) << "rank " << r << "'s buffer was touched";
    EXPECT_TRUE(stats[r].buffer_untouched) << "rank " << r;
  }
}

TEST(RelayAllReduce, ALinkCutAtAnyFrameNeverLeavesOneRankOkAndAnotherPlainlyFailed) {
  const int n = 4;
  const CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 5);
  uint64_t sends = 0;
  const Outcome clean = RunAll(n, spec, AllRelay, std::nullopt, LinkFault::Drop(), &sends);
  for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sends, 2u * (n - 1));  // N-1 relay frames, N-1 commit frames
  int in_doubt = 0;
  for (uint64_t cut = 0; cut < sends; ++cut) {
    for (LinkFault fault : {LinkFault::Drop(), LinkFault::Close()}) {
      SCOPED_TRACE(absl::StrCat("send ", cut, " of rank 1 ",
                                fault.kind == LinkFault::Kind::kDrop ? "lost" : "closes the link"));
      const Outcome run = RunAll(n, spec, AllRelay, cut, fault);
      bool any_ok = false, any_plain = false;
      for (int r = 0; r < n; ++r) {
        const absl::Status& s = run.statuses[r];
        const bool doubt = OutcomeMarkOf(s) == OutcomeMark::kInDoubt;
        any_ok = any_ok || s.ok();
        any_plain = any_plain || (!s.ok() && !doubt);
        in_doubt += doubt ? 1 : 0;
        if (s.ok()) {
          EXPECT_TRUE(run.buffers[r] == clean.buffers[r]) << "rank " << r << " OK, wrong result";
        } else {
          EXPECT_THAT(std::string(s.message()),
                      HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17 'step/grad')")));
        }
      }
      EXPECT_FALSE(any_ok && any_plain) << "OK on one rank and a plain failure on another";
      // A cut in the relay pass keeps some rank from completing its data, so from sending
      // its commit: no rank may return OK (those that completed theirs may be in doubt).
      if (cut < n - 1) {
        for (const absl::Status& s : run.statuses) EXPECT_FALSE(s.ok());
      }
    }
  }
  EXPECT_GT(in_doubt, 0);  // cuts in the commit pass reach the case no protocol closes
}

AllReduceAlgorithm Choose(int world_size, uint64_t bytes, const AlgorithmPolicy& policy) {
  return ChooseAllReduceAlgorithm(world_size, bytes, DType::kFloat32, ReduceOp::kSum, policy);
}

TEST(AllReduceAlgorithmChoice, AutoRelaysUpToAThresholdThatShrinksTowardsTheFlagAsTheRingGrows) {
  AlgorithmPolicy policy;
  policy.relay_max_bytes = 1200;
  // N/(N-2) times the flag: the hops the relay saves against the bytes it adds.
  EXPECT_EQ(RelayMaxBytes(4, policy), 2400u);
  EXPECT_EQ(RelayMaxBytes(8, policy), 1600u);
  EXPECT_EQ(RelayMaxBytes(3, policy), 3600u);
  EXPECT_EQ(RelayMaxBytes(1202, policy), 1202u);
  EXPECT_EQ(RelayMaxBytes(2, policy), 16u * 1200) << "two ranks: the relay moves no more bytes";
  EXPECT_EQ(Choose(4, 4, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(4, 2400, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(4, 2401, policy), AllReduceAlgorithm::kRing);
  EXPECT_EQ(Choose(8, 2400, policy), AllReduceAlgorithm::kRing);
  EXPECT_EQ(Choose(1, 4, policy), AllReduceAlgorithm::kRing) << "one rank: nothing to relay";
}

TEST(AllReduceAlgorithmChoice, NoModeRelaysMoreThanAFrameHolds) {
  AlgorithmPolicy policy;
  policy.relay_max_bytes = 1 << 20;
  policy.relay_frame_limit_bytes = 64 << 10;
  EXPECT_EQ(RelayMaxBytes(2, policy), 64u << 10);
  EXPECT_EQ(Choose(4, 64 << 10, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(4, (64 << 10) + 1, policy), AllReduceAlgorithm::kRing);
  policy.mode = AlgorithmPolicy::Mode::kRelay;
  EXPECT_EQ(Choose(4, 64 << 10, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(4, (64 << 10) + 1, policy), AllReduceAlgorithm::kRing)
      << "forced relay: a buffer larger than a frame runs the ring";
}

TEST(AllReduceAlgorithmChoice, ForcedModesWin) {
  AlgorithmPolicy policy;
  policy.mode = AlgorithmPolicy::Mode::kRing;
  EXPECT_EQ(Choose(4, 4, policy), AllReduceAlgorithm::kRing);
  policy.mode = AlgorithmPolicy::Mode::kRelay;
  EXPECT_EQ(Choose(16, 1 << 20, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(ParseAlgorithmMode("relay"), AlgorithmPolicy::Mode::kRelay);
  EXPECT_EQ(ParseAlgorithmMode("tree"), std::nullopt);
}

}  // namespace
}  // namespace ringsync
