// Specification of the stride all-reduces (the small-message algorithms over stride
// links: the doubling on strides 1, 2, 4, ..., the direct exchange on every stride) and
// of the rule that chooses them: N ranks as threads over the in-memory stride links of
// MemoryStrideMesh. Each gives bitwise the ring's result, the doubling in ceil(log2 N)
// hops per pass and the direct exchange in one; each fails on every rank, and promptly,
// when ranks disagree (on the spec or the algorithm) or one gives up; neither leaves one
// rank OK and another plainly failed; and leftovers of an aborted collective do not
// disturb the next one.
#include "core/ring/stride_allreduce.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/collective.h"
#include "core/link/faulty_link.h"
#include "core/link/memory_link.h"
#include "core/outcome.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/allreduce_algorithm.h"
#include "core/ring/relay_allreduce.h"
#include "core/ring/ring_allreduce.h"
#include "core/sync/steady_stopwatch.h"
#include "core/testing/dtype_op_params.h"
#include "core/testing/links_with_fault.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LinksWithFault;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Bytes;
using testing::RandomInput;

CollectiveSpec Spec(DType dtype, ReduceOp op, size_t count, uint64_t sequence = 17) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.name = "step/grad";
  spec.sequence = sequence;
  spec.dtype = dtype;
  spec.op = op;
  spec.count = count;
  return spec;
}

RingMember Me(int rank, int n) { return RingMember{rank, n, 3}; }

// (stride, contributions each rank sends on its link of that stride)
using Carried = std::pair<int, int>;

// For runs that fail by design: a lost frame is waited for this long.
RingOptions ShortOptions() {
  RingOptions options;
  options.timeout = absl::Milliseconds(500);
  options.abort_notice_timeout = absl::Milliseconds(100);
  return options;
}

// For runs that must succeed, or fail by notice rather than by deadline.
RingOptions LongOptions() {
  RingOptions options;
  options.timeout = absl::Seconds(30);
  return options;
}

std::string Prefix(int rank) {
  return absl::StrCat("rank ", rank, " (generation 3, collective #17 'step/grad'");
}

struct Outcome {
  std::vector<Bytes> buffers;
  std::vector<absl::Status> statuses;
  std::vector<RingStats> stats;
  std::vector<absl::Duration> took;
};

// One rank's call: its rank, a reducer, its buffer (RandomInput seeded by the sequence).
using Buffer = absl::Span<std::byte>;
using RankCall = std::function<absl::Status(int, Reducer&, Buffer, RingStats*)>;

Outcome RunRanks(int n, const CollectiveSpec& spec, const RankCall& call) {
  Outcome run;
  for (int r = 0; r < n; ++r) {
    const auto seed = static_cast<uint32_t>(spec.sequence);
    run.buffers.push_back(RandomInput(spec.dtype, spec.count, r, seed));
  }
  run.stats.resize(n);
  run.took.resize(n);
  run.statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    const SteadyStopwatch start;
    absl::Status s = call(r, reducer, absl::MakeSpan(run.buffers[r]), &run.stats[r]);
    run.took[r] = start.Elapsed();
    return s;
  });
  return run;
}

// The reference: the ring all-reduce of the same inputs.
Outcome RunRing(int n, const CollectiveSpec& spec) {
  MemoryRing ring(n);
  return RunRanks(n, spec, [&](int r, Reducer& reducer, Buffer buffer, RingStats* stats) {
    return RingAllReduce(Me(r, n), ring.link(r), reducer, spec, buffer, LongOptions(), stats);
  });
}

// Every rank runs `schedule` over `mesh`; `links_of` may put a test's links in place of a
// rank's own.
Outcome RunStride(StrideSchedule schedule, MemoryStrideMesh& mesh, const CollectiveSpec& spec,
                  const RingOptions& options = LongOptions(),
                  const std::function<StrideLinks&(int)>& links_of = nullptr) {
  const int n = mesh.world_size();
  return RunRanks(n, spec, [&](int r, Reducer& reducer, Buffer buffer, RingStats* stats) {
    StrideLinks& links = links_of ? links_of(r) : mesh.links(r);
    return StrideAllReduce(schedule, Me(r, n), links, reducer, spec, buffer, options, stats);
  });
}

Outcome RunDoubling(MemoryStrideMesh& mesh, const CollectiveSpec& spec) {
  return RunStride(StrideSchedule::kDoubling, mesh, spec);
}

std::string ScheduleName(const ::testing::TestParamInfo<StrideSchedule>& info) {
  return info.param == StrideSchedule::kDirect ? "Direct" : "Doubling";
}

const auto kEverySchedule = ::testing::Values(StrideSchedule::kDoubling, StrideSchedule::kDirect);

class StrideNumerics : public ::testing::TestWithParam<testing::DTypeAndOp> {};

TEST_P(StrideNumerics, EveryRankGetsBitwiseTheRingsResultFromEitherSchedule) {
  const auto [dtype, op] = GetParam();
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{1001}}) {
      CollectiveSpec spec = Spec(dtype, op, count);
      if (IsFloatingPoint(dtype)) {  // the scale factors take the same path as the ring's
        spec.pre_scale = 0.5;
        spec.post_scale = 3.0;
      }
      const Outcome ring = RunRing(n, spec);
      for (StrideSchedule schedule : {StrideSchedule::kDoubling, StrideSchedule::kDirect}) {
        SCOPED_TRACE(absl::StrCat("N=", n, " count=", count, " ",
                                  schedule == StrideSchedule::kDirect ? "direct" : "doubling"));
        MemoryStrideMesh mesh(n);
        const Outcome run = RunStride(schedule, mesh, spec);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(ring.statuses[r].ok()) << ring.statuses[r];
          ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
          EXPECT_TRUE(run.buffers[r] == ring.buffers[r]) << "rank " << r << " differs";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDTypeAndOp, StrideNumerics, testing::EveryDTypeAndOp(),
                         testing::DTypeAndOpName);

// A small reduce-scatter runs the whole stride all-reduce: rank r's block is bitwise the
// ring reduce-scatter's, whatever the schedule; an input that is not one block per rank is
// refused on every rank.
TEST(StrideReduceScatter, EachRanksBlockIsBitwiseTheRingReduceScattersFromEitherSchedule) {
  for (int n : {2, 3, 4, 5, 8}) {
    for (const auto& [dtype, op] : {std::pair{DType::kFloat32, ReduceOp::kSum},
                                    std::pair{DType::kBFloat16, ReduceOp::kAvg},
                                    std::pair{DType::kInt8, ReduceOp::kMax}}) {
      CollectiveSpec spec = Spec(dtype, op, static_cast<size_t>(7 * n));
      spec.kind = CollectiveKind::kReduceScatter;
      MemoryRing ring_links(n);
      const Outcome ring = RunRanks(n, spec, [&](int r, Reducer& reducer, Buffer buffer,
                                                 RingStats* stats) {
        return RingReduceScatter(Me(r, n), ring_links.link(r), reducer, spec, buffer,
                                 LongOptions(), stats);
      });
      const size_t block = 7 * DTypeSize(dtype);
      for (StrideSchedule schedule : {StrideSchedule::kDoubling, StrideSchedule::kDirect}) {
        SCOPED_TRACE(absl::StrCat("N=", n, " ", DTypeName(dtype), " ",
                                  schedule == StrideSchedule::kDirect ? "direct" : "doubling"));
        MemoryStrideMesh mesh(n);
        const Outcome run = RunStride(schedule, mesh, spec);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(ring.statuses[r].ok()) << ring.statuses[r];
          ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
          EXPECT_TRUE(Bytes(run.buffers[r].begin() + r * block,
                            run.buffers[r].begin() + (r + 1) * block) ==
                      Bytes(ring.buffers[r].begin() + r * block,
                            ring.buffers[r].begin() + (r + 1) * block))
              << "rank " << r << "'s block differs";
        }
      }
    }
  }
  CollectiveSpec uneven = Spec(DType::kFloat32, ReduceOp::kSum, 10);
  uneven.kind = CollectiveKind::kReduceScatter;
  MemoryStrideMesh mesh(3);
  const Outcome run = RunStride(StrideSchedule::kDirect, mesh, uneven);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr("10 elements are not a multiple of this ring's 3 ranks"));
  }
}

TEST(DoublingAllReduce, EachRankSendsNMinusOneContributionsAndLog2NCommitsOverStrides124) {
  const int n = 8;
  const size_t count = 10;
  const uint64_t bytes = count * sizeof(float);
  EXPECT_EQ(StrideRounds(StrideSchedule::kDoubling, n), 3);
  MemoryStrideMesh mesh(n);
  const Outcome run = RunDoubling(mesh, Spec(DType::kFloat32, ReduceOp::kSum, count));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    EXPECT_EQ(run.stats[r].frames_sent, (n - 1) + 3u) << "N-1 gather frames, log2 N commits";
    EXPECT_EQ(run.stats[r].bytes_sent, (n - 1) * bytes);
    // Step k (stride 2^k) carries 2^k contributions, then one commit frame.
    for (const auto& [stride, carried] : {Carried{1, 1}, Carried{2, 2}, Carried{4, 4}}) {
      EXPECT_EQ(mesh.ring(stride).frames_sent(r), carried + 1u) << "stride " << stride;
      EXPECT_EQ(mesh.ring(stride).bytes_sent(r), carried * bytes) << "stride " << stride;
    }
    for (int stride : {3, 5, 6, 7}) EXPECT_EQ(mesh.ring(stride).frames_sent(r), 0u) << stride;
    // The links it used stay connected for the generation, the ring link first.
    const std::vector<Link*> connected = mesh.links(r).Connected();
    ASSERT_EQ(connected.size(), 3u);
    EXPECT_EQ(connected.front(), &mesh.ring(1).link(r));
    EXPECT_THAT(connected, UnorderedElementsAre(&mesh.ring(1).link(r), &mesh.ring(2).link(r),
                                                &mesh.ring(4).link(r)));
  }
}

TEST(DoublingAllReduce, OnFiveRanksTheLastStepCarriesOnlyTheOneContributionStillMissing) {
  const int n = 5;
  const uint64_t bytes = 6 * sizeof(float);
  EXPECT_EQ(StrideRounds(StrideSchedule::kDoubling, n), 3);
  MemoryStrideMesh mesh(n);
  const Outcome run = RunDoubling(mesh, Spec(DType::kFloat32, ReduceOp::kSum, 6));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    EXPECT_EQ(run.stats[r].frames_sent, (n - 1) + 3u);
    // min(s, N-s) contributions at stride s: 1, 2, then min(4, 1) = 1.
    for (const auto& [stride, carried] : {Carried{1, 1}, Carried{2, 2}, Carried{4, 1}}) {
      EXPECT_EQ(mesh.ring(stride).frames_sent(r), carried + 1u) << "stride " << stride;
      EXPECT_EQ(mesh.ring(stride).bytes_sent(r), carried * bytes) << "stride " << stride;
    }
    EXPECT_EQ(mesh.ring(3).frames_sent(r), 0u);
  }
}

// What a worker connects ahead of a schedule's first run: exactly the links it sends on.
TEST(StridesBeyondTheRing, AreTheLinksBesideTheRingLinkThatARunSendsOn) {
  EXPECT_THAT(StridesBeyondTheRing(StrideSchedule::kDoubling, 8), ElementsAre(2, 4));
  EXPECT_THAT(StridesBeyondTheRing(StrideSchedule::kDirect, 5), ElementsAre(2, 3, 4));
  EXPECT_THAT(StridesBeyondTheRing(StrideSchedule::kDoubling, 2), IsEmpty());
  EXPECT_THAT(StridesBeyondTheRing(StrideSchedule::kDirect, 1), IsEmpty());
  for (StrideSchedule schedule : {StrideSchedule::kDoubling, StrideSchedule::kDirect}) {
    for (int n : {3, 5, 6, 8}) {
      SCOPED_TRACE(absl::StrCat(schedule == StrideSchedule::kDirect ? "direct" : "doubling",
                                ", ", n, " ranks"));
      const std::vector<int> strides = StridesBeyondTheRing(schedule, n);
      MemoryStrideMesh mesh(n);
      const Outcome run = RunStride(schedule, mesh, Spec(DType::kFloat32, ReduceOp::kSum, 3));
      for (int r = 0; r < n; ++r) ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
      for (int stride = 2; stride < n; ++stride) {
        const bool listed = absl::c_linear_search(strides, stride);
        EXPECT_EQ(mesh.ring(stride).frames_sent(0) > 0, listed) << "stride " << stride;
      }
    }
  }
}

TEST(DirectExchange, EachRankSendsItsContributionAndACommitToEveryOtherRankInOneRound) {
  const int n = 5;
  const uint64_t bytes = 6 * sizeof(float);
  EXPECT_EQ(StrideRounds(StrideSchedule::kDirect, n), 1);
  EXPECT_EQ(StrideRounds(StrideSchedule::kDirect, 1), 0);
  MemoryStrideMesh mesh(n);
  const Outcome run =
      RunStride(StrideSchedule::kDirect, mesh, Spec(DType::kFloat32, ReduceOp::kSum, 6));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    EXPECT_EQ(run.stats[r].frames_sent, 2 * (n - 1u)) << "N-1 contributions, N-1 commits";
    EXPECT_EQ(run.stats[r].bytes_sent, (n - 1) * bytes);
    EXPECT_EQ(run.stats[r].bytes_received, (n - 1) * bytes);
    for (int stride = 1; stride < n; ++stride) {
      EXPECT_EQ(mesh.ring(stride).frames_sent(r), 2u) << "stride " << stride;
      EXPECT_EQ(mesh.ring(stride).bytes_sent(r), bytes) << "stride " << stride;
    }
    const std::vector<Link*> connected = mesh.links(r).Connected();
    ASSERT_EQ(connected.size(), n - 1u);
    EXPECT_EQ(connected.front(), &mesh.ring(1).link(r));
  }
}

class StrideAllReduceTest : public ::testing::TestWithParam<StrideSchedule> {};

INSTANTIATE_TEST_SUITE_P(EverySchedule, StrideAllReduceTest, kEverySchedule, ScheduleName);

TEST_P(StrideAllReduceTest, MismatchingSpecsFailOnEveryRankWithNoBufferTouched) {
  const int n = 5;
  struct Case {
    const char* what;
    size_t count_of_rank_2;
    ReduceOp op_of_rank_2;
    const char* quoted;
  };
  for (const Case& c : {Case{"count", 4, ReduceOp::kSum, "rank 2 has allreduce 4 x float32 sum"},
                        Case{"op", 8, ReduceOp::kMax, "rank 2 has allreduce 8 x float32 max"}}) {
    SCOPED_TRACE(absl::StrCat("rank 2 has a different ", c.what));
    MemoryStrideMesh mesh(n);
    const CollectiveSpec common = Spec(DType::kFloat32, ReduceOp::kSum, 8);
    const Outcome run = RunRanks(n, common, [&](int r, Reducer& reducer,
                                                Buffer buffer, RingStats* stats) {
      CollectiveSpec spec = common;
      if (r == 2) {
        spec.count = c.count_of_rank_2;
        spec.op = c.op_of_rank_2;
        buffer = buffer.first(spec.count * sizeof(float));
      }
      return StrideAllReduce(GetParam(), Me(r, n), mesh.links(r), reducer, spec, buffer,
                             ShortOptions(), stats);
    });
    for (int r = 0; r < n; ++r) {
      const absl::Status& s = run.statuses[r];
      EXPECT_TRUE(absl::IsFailedPrecondition(s)) << "rank " << r << ": " << s;
      EXPECT_TRUE(IsAgreementMismatch(s)) << "rank " << r << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr(Prefix(r)));
      EXPECT_THAT(std::string(s.message()), HasSubstr(c.quoted));
      EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
      EXPECT_TRUE(run.buffers[r] == RandomInput(DType::kFloat32, 8, r, 17))
          << "rank " << r << "'s buffer was touched";
    }
  }
}

TEST_P(StrideAllReduceTest, ARankThatRunsTheRelayMakesEveryRankFailNamingTheDifference) {
  const int n = 5;
  // Rank 0 relays on its ring link (its flags differ, or its size, so its choice did).
  for (size_t relay_count : {size_t{8}, size_t{4}}) {
    SCOPED_TRACE(absl::StrCat("rank 0 relays ", relay_count, " elements"));
    MemoryStrideMesh mesh(n);
    const Outcome run = RunRanks(n, Spec(DType::kFloat32, ReduceOp::kSum, 8),
                                 [&](int r, Reducer& reducer, Buffer buffer, RingStats*) {
      CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 8);
      if (r != 0) {
        return StrideAllReduce(GetParam(), Me(r, n), mesh.links(r), reducer, spec, buffer,
                               ShortOptions());
      }
      spec.count = relay_count;
      return RelayAllReduce(Me(r, n), mesh.ring(1).link(r), reducer, spec,
                            buffer.first(relay_count * sizeof(float)), ShortOptions());
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_FALSE(run.statuses[r].ok()) << "rank " << r;
      EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr(Prefix(r)));
      EXPECT_THAT(std::string(run.statuses[r].message()),
                  AnyOf(HasSubstr("different all-reduce algorithms"),
                        HasSubstr("rank 0 has allreduce 4 x float32")))
          << "rank " << r;
    }
  }
}

TEST(StrideAllReduce, ARankThatRunsTheOtherScheduleMakesEveryRankFailNamingTheDifference) {
  const int n = 4;
  for (int odd_one : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("rank ", odd_one, " runs the doubling, the others direct"));
    MemoryStrideMesh mesh(n);
    const CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 8);
    const Outcome run = RunRanks(n, spec, [&](int r, Reducer& reducer, Buffer buffer,
                                              RingStats* stats) {
      const StrideSchedule schedule =
          r == odd_one ? StrideSchedule::kDoubling : StrideSchedule::kDirect;
      return StrideAllReduce(schedule, Me(r, n), mesh.links(r), reducer, spec, buffer,
                             LongOptions(), stats);
    });
    for (int r = 0; r < n; ++r) {
      const absl::Status& s = run.statuses[r];
      ASSERT_FALSE(s.ok()) << "rank " << r;
      EXPECT_TRUE(absl::IsFailedPrecondition(s) || absl::IsAborted(s)) << "rank " << r << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr(Prefix(r)));
      EXPECT_THAT(std::string(s.message()), HasSubstr("different all-reduce algorithms"))
          << "rank " << r;
      EXPECT_THAT(std::string(s.message()), HasSubstr("--direct_max_ranks")) << "rank " << r;
      EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
      // A liveness bound, far from the 30 s deadline: the difference is seen, not waited out.
      EXPECT_LT(run.took[r], absl::Seconds(10)) << "rank " << r;
    }
  }
}

TEST_P(StrideAllReduceTest, ARankThatGivesUpMakesEveryOtherRankFailPromptlyNamingIt) {
  const int n = 8;
  const int quitter = 3;
  MemoryStrideMesh mesh(n);
  const CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 8);
  const Outcome run = RunRanks(n, spec, [&](int r, Reducer& reducer, Buffer buffer,
                                            RingStats* stats) {
    if (r == quitter) buffer = buffer.first(buffer.size() - 1);  // not 8 floats: rejected
    return StrideAllReduce(GetParam(), Me(r, n), mesh.links(r), reducer, spec, buffer,
                           LongOptions(), stats);
  });
  EXPECT_TRUE(absl::IsInvalidArgument(run.statuses[quitter])) << run.statuses[quitter];
  for (int r = 0; r < n; ++r) {
    // A liveness bound, far from the 30 s deadline: the notice came, no wait ran out.
    EXPECT_LT(run.took[r], absl::Seconds(10)) << "rank " << r;
    if (r == quitter) continue;
    EXPECT_TRUE(absl::IsAborted(run.statuses[r])) << "rank " << r << ": " << run.statuses[r];
    EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr(absl::StrCat("rank ", quitter, " gave up")));
    EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
  }
}

// Rank 1 sends on its link of `stride` through a FaultyLink, with `fault` at send `cut`.
Outcome RunWithFault(StrideSchedule schedule, int n, const CollectiveSpec& spec, int stride,
                     std::optional<uint64_t> cut, LinkFault fault,
                     uint64_t* faulty_sends = nullptr) {
  MemoryStrideMesh mesh(n);
  FaultyLink faulty(mesh.ring(stride).link(1));
  if (cut.has_value()) faulty.Script(*cut, fault);
  LinksWithFault rank_1(mesh.links(1), mesh.ring(stride).link(1), faulty);
  Outcome run = RunStride(schedule, mesh, spec, ShortOptions(), [&](int r) -> StrideLinks& {
    return r == 1 ? rank_1 : mesh.links(r);
  });
  if (faulty_sends != nullptr) *faulty_sends = faulty.sends();
  return run;
}

TEST_P(StrideAllReduceTest, ALinkCutAtAnyFrameNeverLeavesOneRankOkAndAnotherPlainlyFailed) {
  const int n = 5;
  const CollectiveSpec spec = Spec(DType::kFloat32, ReduceOp::kSum, 5);
  int in_doubt = 0;
  // The links rank 1 sends on, with the contributions it sends on each.
  const std::vector<Carried> lanes =
      GetParam() == StrideSchedule::kDoubling
          ? std::vector<Carried>{{1, 1}, {2, 2}, {4, 1}}
          : std::vector<Carried>{{1, 1}, {2, 1}, {3, 1}, {4, 1}};
  for (const auto& [stride, carried] : lanes) {
    uint64_t sends = 0;
    const Outcome clean =
        RunWithFault(GetParam(), n, spec, stride, std::nullopt, LinkFault::Drop(), &sends);
    for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(sends, carried + 1u) << "stride " << stride << ": gather frames, one commit";
    for (uint64_t cut = 0; cut < sends; ++cut) {
      for (LinkFault fault : {LinkFault::Drop(), LinkFault::Close()}) {
        SCOPED_TRACE(absl::StrCat("send ", cut, " of rank 1 on stride ", stride, " ",
                                  fault.kind == LinkFault::Kind::kDrop ? "lost" : "closed"));
        const Outcome run = RunWithFault(GetParam(), n, spec, stride, cut, fault);
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
            EXPECT_THAT(std::string(s.message()), HasSubstr(Prefix(r)));
            // The direct exchange has one round: its failures name frames, not steps.
            if (GetParam() == StrideSchedule::kDirect) {
              EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("step ")));
            }
          }
        }
        EXPECT_FALSE(any_ok && any_plain) << "OK on one rank and a plain failure on another";
        // A cut in the gather keeps a rank from completing its data, so from ever sending
        // its commit, which every rank's barrier needs: no rank may return OK.
        if (cut < static_cast<uint64_t>(carried)) {
          EXPECT_FALSE(any_ok);
        }
      }
    }
  }
  EXPECT_GT(in_doubt, 0);  // cuts in the commit pass reach the case no protocol closes
}

TEST_P(StrideAllReduceTest, LeftoversOfAnAbortedCollectiveOnStrideLinksAreSkippedByTheNext) {
  const int n = 8;
  const int quitter = 3;
  MemoryStrideMesh mesh(n);
  // Collective #17: rank 3 gives up at once; the others abort after sending what they
  // could, some of it to rank 3, which never reads it.
  const CollectiveSpec first = Spec(DType::kFloat32, ReduceOp::kSum, 8, 17);
  const Outcome aborted = RunRanks(n, first, [&](int r, Reducer& reducer,
                                                 Buffer buffer, RingStats* stats) {
    if (r == quitter) buffer = buffer.first(buffer.size() - 1);
    return StrideAllReduce(GetParam(), Me(r, n), mesh.links(r), reducer, first, buffer,
                           LongOptions(), stats);
  });
  for (const absl::Status& s : aborted.statuses) ASSERT_FALSE(s.ok());
  // On stride 2, a link rank 3 never connected (so never marked #17 finished on): in the
  // doubling rank 1 always completes its step 0 and sends its step-1 pair to rank 3; in
  // the direct exchange it sends its contribution before it receives anything.
  ASSERT_GE(mesh.ring(2).link(quitter).queued_frames(),
            GetParam() == StrideSchedule::kDoubling ? 2u : 1u);

  // Collective #18 on the same links: every rank skips #17's frames and gets the result.
  const CollectiveSpec second = Spec(DType::kFloat32, ReduceOp::kSum, 8, 18);
  const Outcome ring = RunRing(n, second);
  const Outcome run = RunStride(GetParam(), mesh, second);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
    EXPECT_TRUE(run.buffers[r] == ring.buffers[r]) << "rank " << r << " differs from the ring";
  }
}

AllReduceAlgorithm Choose(int world_size, uint64_t bytes, const AlgorithmPolicy& policy) {
  return ChooseAllReduceAlgorithm(world_size, bytes, DType::kFloat32, ReduceOp::kSum, policy);
}

TEST(AllReduceAlgorithmChoice, AutoRunsTheDirectExchangeForSmallBuffersOnThreeToDirectMaxRanks) {
  AlgorithmPolicy policy;
  EXPECT_EQ(Choose(4, 64, policy), AllReduceAlgorithm::kRelay) << "no stride links: never";
  EXPECT_EQ(DirectMaxBytes(4, policy), 0u);
  policy.stride_links = true;
  ASSERT_EQ(policy.direct_max_ranks, 4);
  EXPECT_EQ(Choose(3, 64, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(4, 64, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(5, 64, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(2, 64, policy), AllReduceAlgorithm::kRelay) << "one hop a pass either way";
  policy.direct_max_ranks = 8;
  EXPECT_EQ(Choose(8, 64, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(9, 64, policy), AllReduceAlgorithm::kDoubling);
  policy.direct_max_ranks = 0;
  EXPECT_EQ(Choose(3, 64, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(4, 64, policy), AllReduceAlgorithm::kDoubling);
}

TEST(AllReduceAlgorithmChoice, AutoNeverRunsTheDirectExchangeAboveItsFrameLimitOrTheRelays) {
  AlgorithmPolicy policy;
  policy.stride_links = true;
  policy.stride_frame_bytes = 5000;
  policy.relay_max_bytes = 3000;  // RelayMaxBytes: 9000 at N=3, 6000 at N=4
  EXPECT_EQ(DirectMaxBytes(4, policy), 5000u) << "one frame per link: no step limit";
  EXPECT_EQ(DirectMaxBytes(kDirectRanksLimit, policy), 5000u);
  EXPECT_EQ(DirectMaxBytes(kDirectRanksLimit + 1, policy), 0u) << "a link to every rank";
  EXPECT_EQ(Choose(4, 5000, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(4, 5001, policy), AllReduceAlgorithm::kRelay);
  policy.relay_max_bytes = 1000;  // RelayMaxBytes(4) = 2000
  EXPECT_EQ(Choose(4, 2000, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(4, 2001, policy), AllReduceAlgorithm::kRing);
}

TEST(AllReduceAlgorithmChoice, ForcedDirectExchangeRunsOnAnyRingUpToItsLimitElseTheRelay) {
  AlgorithmPolicy policy;
  policy.mode = AlgorithmPolicy::Mode::kDirect;
  policy.stride_links = true;
  policy.stride_frame_bytes = 5000;
  policy.relay_frame_limit_bytes = 64 << 10;
  policy.direct_max_ranks = 0;  // auto's threshold: no say in a forced mode
  EXPECT_EQ(Choose(2, 64, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(kDirectRanksLimit, 5000, policy), AllReduceAlgorithm::kDirect);
  EXPECT_EQ(Choose(kDirectRanksLimit + 1, 64, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(8, 5001, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(8, (64 << 10) + 1, policy), AllReduceAlgorithm::kRing);
  policy.stride_links = false;
  EXPECT_EQ(Choose(4, 64, policy), AllReduceAlgorithm::kRelay) << "no stride links: the relay";
}

TEST(AllReduceAlgorithmChoice, AutoRunsTheDoublingForSmallBuffersOnRingsBeyondTheDirectExchanges) {
  AlgorithmPolicy policy;
  EXPECT_EQ(Choose(8, 64, policy), AllReduceAlgorithm::kRelay) << "no stride links: never";
  EXPECT_EQ(DoublingMaxBytes(8, policy), 0u);
  policy.stride_links = true;
  policy.direct_max_ranks = 0;
  for (int n : {4, 5, 8, 16, 64}) {
    EXPECT_EQ(Choose(n, 64, policy), AllReduceAlgorithm::kDoubling) << n << " ranks";
  }
  EXPECT_EQ(Choose(3, 64, policy), AllReduceAlgorithm::kRelay) << "at N=3 the hops are the relay's";
  EXPECT_EQ(Choose(2, 64, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(1, 64, policy), AllReduceAlgorithm::kRing) << "one rank: no hop either way";
  policy.doubling_min_ranks = 3;
  EXPECT_EQ(Choose(3, 64, policy), AllReduceAlgorithm::kDoubling);
}

TEST(AllReduceAlgorithmChoice, AutoNeverRunsTheDoublingAboveItsLimitOrTheRelays) {
  AlgorithmPolicy policy;
  policy.stride_links = true;
  policy.direct_max_ranks = 0;
  policy.relay_max_bytes = 3000;  // RelayMaxBytes: 6000 at N=4, 4000 at N=8, 3428 at N=16
  policy.stride_frame_bytes = 5000;
  policy.doubling_step_bytes = 16000;  // a step carries up to N/2 contributions
  EXPECT_EQ(DoublingMaxBytes(4, policy), 5000u) << "the frame limit";
  EXPECT_EQ(DoublingMaxBytes(8, policy), 4000u) << "16000 / (8/2)";
  EXPECT_EQ(DoublingMaxBytes(16, policy), 2000u) << "16000 / (16/2)";
  policy.relay_frame_limit_bytes = 1000;
  EXPECT_EQ(DoublingMaxBytes(4, policy), 1000u) << "no frame beyond what peers read";
  policy.relay_frame_limit_bytes = 1 << 20;

  EXPECT_EQ(Choose(4, 5000, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(4, 5001, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(16, 2000, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(16, 2001, policy), AllReduceAlgorithm::kRelay);
  policy.relay_max_bytes = 1200;  // RelayMaxBytes(8) = 1600, below DoublingMaxBytes(8)
  EXPECT_EQ(Choose(8, 1600, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(8, 1601, policy), AllReduceAlgorithm::kRing) << "the relay's size limit too";
}

TEST(AllReduceAlgorithmChoice, ForcedDoublingBeyondItsLimitFallsBackToTheRelayThenTheRing) {
  AlgorithmPolicy policy;
  policy.mode = AlgorithmPolicy::Mode::kDoubling;
  policy.stride_links = true;
  policy.stride_frame_bytes = 5000;
  policy.relay_frame_limit_bytes = 64 << 10;
  EXPECT_EQ(Choose(8, 5000, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(8, 1 << 10, policy), AllReduceAlgorithm::kDoubling);
  EXPECT_EQ(Choose(8, 5001, policy), AllReduceAlgorithm::kRelay);
  EXPECT_EQ(Choose(8, (64 << 10) + 1, policy), AllReduceAlgorithm::kRing);
  policy.stride_links = false;
  EXPECT_EQ(Choose(8, 64, policy), AllReduceAlgorithm::kRelay) << "no stride links: the relay";
}

TEST(AllReduceAlgorithmChoice, TheStrideAlgorithmsAreNamedOnTheCommandLineAndInMessagesAlike) {
  EXPECT_EQ(ParseAlgorithmMode("doubling"), AlgorithmPolicy::Mode::kDoubling);
  EXPECT_EQ(AlgorithmName(AllReduceAlgorithm::kDoubling), "doubling");
  EXPECT_EQ(ParseAlgorithmMode("direct"), AlgorithmPolicy::Mode::kDirect);
  EXPECT_EQ(AlgorithmName(AllReduceAlgorithm::kDirect), "direct");
  EXPECT_EQ(ParseAlgorithmMode("Direct"), std::nullopt);
}

}  // namespace
}  // namespace ringsync
