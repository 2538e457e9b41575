// Specification of how a ring all-reduce fails: never a hang, never a silent wrong
// answer, and every rank learns why.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allreduce.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Bytes;

constexpr absl::Duration kTimeout = absl::Seconds(5);

CollectiveSpec Spec(size_t count, DType dtype = DType::kFloat32, ReduceOp op = ReduceOp::kSum) {
  CollectiveSpec spec;
  spec.name = "grad/fc1";
  spec.sequence = 17;
  spec.dtype = dtype;
  spec.op = op;
  spec.count = count;
  return spec;
}

// Runs rank r with specs[r]; returns each rank's status.
std::vector<absl::Status> RunWithSpecs(const std::vector<CollectiveSpec>& specs,
                                       MemoryRing* shared_ring = nullptr) {
  const int n = static_cast<int>(specs.size());
  std::unique_ptr<MemoryRing> own;
  if (shared_ring == nullptr) {
    own = std::make_unique<MemoryRing>(n);
    shared_ring = own.get();
  }
  RingOptions options;
  options.timeout = kTimeout;
  options.segment_bytes = 256;
  return SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    Bytes buffer = testing::RandomInput(specs[rank].dtype, specs[rank].count, rank, 1);
    return RingAllReduce(RingMember{rank, n, 3}, shared_ring->link(rank), reducer, specs[rank],
                         absl::MakeSpan(buffer), options);
  });
}

TEST(RingFailure, RanksDisagreeingOnCountAllFailQuotingBothSides) {
  std::vector<CollectiveSpec> specs(4, Spec(1024));
  specs[2].count = 1000;
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = RunWithSpecs(specs);
  EXPECT_LT(start.Elapsed(), kTimeout) << "a disagreement must not wait for the deadline";
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()),
                AllOf(HasSubstr("collective #17 'grad/fc1'"), HasSubstr("1000 x float32"),
                      HasSubstr("1024 x float32"), HasSubstr(absl::StrCat("rank ", r))))
        << statuses[r];
  }
}

TEST(RingFailure, RanksAgreeBeforeAnyBufferIsTouchedSoAMismatchLeavesThemAsTheyWere) {
  const int n = 4;
  std::vector<CollectiveSpec> specs(n, Spec(1024));
  for (CollectiveSpec& spec : specs) spec.pre_scale = 0.5;  // would change every buffer first
  specs[3].count = 1000;
  std::vector<Bytes> inputs, buffers;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, specs[r].count, r, 1));
    buffers.push_back(inputs.back());
  }
  MemoryRing ring(n);
  RingOptions options;
  options.timeout = kTimeout;
  options.segment_bytes = 256;
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    return RingAllReduce(RingMember{rank, n, 3}, ring.link(rank), reducer, specs[rank],
                         absl::MakeSpan(buffers[rank]), options);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_TRUE(buffers[r] == inputs[r]) << "rank " << r << "'s buffer changed";
  }
}

TEST(RingFailure, RanksDisagreeingOnDtypeOrOpAllFail) {
  std::vector<CollectiveSpec> dtypes(3, Spec(64));
  dtypes[0].dtype = DType::kFloat16;
  for (const absl::Status& s : RunWithSpecs(dtypes)) {
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("float16"), HasSubstr("float32"))) << s;
  }
  std::vector<CollectiveSpec> ops(3, Spec(64));
  ops[1].op = ReduceOp::kMax;
  for (const absl::Status& s : RunWithSpecs(ops)) {
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("max"), HasSubstr("sum"))) << s;
  }
}

TEST(RingFailure, RanksAtDifferentCollectivesAllFail) {
  std::vector<CollectiveSpec> specs(3, Spec(64));
  specs[1].sequence = 18;
  specs[1].name = "grad/fc2";
  for (const absl::Status& s : RunWithSpecs(specs)) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("same order")) << s;
  }
}

TEST(RingFailure, AnEmptyCollectiveStillChecksAgreement) {
  std::vector<CollectiveSpec> specs(4, Spec(0));
  specs[3].dtype = DType::kInt64;
  for (const absl::Status& s : RunWithSpecs(specs)) EXPECT_FALSE(s.ok()) << s;
}

TEST(RingFailure, AMissingRankMakesEveryOtherRankTimeOutNamingItsNeighbour) {
  const int n = 4;
  MemoryRing ring(n);
  RingOptions options;
  options.timeout = absl::Milliseconds(300);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) -> absl::Status {
    if (rank == 2) return absl::OkStatus();  // this rank's process is gone
    CpuReducer reducer;
    Bytes buffer = testing::RandomInput(DType::kFloat32, 4096, rank, 1);
    return RingAllReduce(RingMember{rank, n, 3}, ring.link(rank), reducer, Spec(4096),
                         absl::MakeSpan(buffer), options);
  });
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(statuses[r].ok());
    EXPECT_THAT(std::string(statuses[r].message()),
                AllOf(HasSubstr(absl::StrCat("rank ", r, " (generation 3, collective #17")),
                      HasSubstr("rank ")))
        << statuses[r];
  }
  // Rank 3 waits on rank 2 directly; it must say so.
  EXPECT_EQ(statuses[3].code(), absl::StatusCode::kDeadlineExceeded) << statuses[3];
  EXPECT_THAT(std::string(statuses[3].message()), HasSubstr("from rank 2"));
}

TEST(RingFailure, ABadBufferOnOneRankFailsEveryRankQuickly) {
  const int n = 3;
  MemoryRing ring(n);
  RingOptions options;
  options.timeout = kTimeout;
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    Bytes buffer(rank == 1 ? 10 : 64 * 4);  // rank 1 passes a buffer of the wrong size
    return RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, Spec(64),
                         absl::MakeSpan(buffer), options);
  });
  EXPECT_LT(start.Elapsed(), kTimeout);
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kInvalidArgument) << statuses[1];
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("buffer holds 10 bytes"));
  for (int r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kAborted) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("rank 1 gave up")) << statuses[r];
  }
}

// --segment_bytes must be the same on every rank (README). A rank started with another
// fails at the first segment that is not where its schedule expects it, and the ring with it,
// at once; no rank returns OK, none waits for the deadline.
TEST(RingFailure, RanksCuttingDifferentSegmentsAllFailQuicklyAtTheFirstMisplacedSegment) {
  const int n = 4;
  MemoryRing ring(n);
  const SteadyStopwatch start;
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
    RingOptions options;
    options.timeout = kTimeout;
    options.segment_bytes = rank == 2 ? 512 : 256;
    CpuReducer reducer;
    Bytes buffer = testing::RandomInput(DType::kFloat32, 4096, rank, 1);
    return RingAllReduce(RingMember{rank, n, 3}, ring.link(rank), reducer, Spec(4096),
                         absl::MakeSpan(buffer), options);
  });
  EXPECT_LT(start.Elapsed(), kTimeout) << "a misplaced segment must not wait for the deadline";
  int misplaced = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    if (absl::StrContains(statuses[r].message(), "out-of-schedule frame")) ++misplaced;
  }
  EXPECT_GE(misplaced, 1) << "the rank that received it says so; the others hear its abort";
}

TEST(RingFailure, TheRingServesTheNextCollectiveAfterAFailedOne) {
  const int n = 4;
  MemoryRing ring(n);
  std::vector<CollectiveSpec> bad(n, Spec(5000));
  bad[0].count = 4000;
  for (const absl::Status& s : RunWithSpecs(bad, &ring)) EXPECT_FALSE(s.ok());

  // Frames of the failed collective may still sit in the links; they must be skipped.
  std::vector<CollectiveSpec> good(n, Spec(5000));
  for (CollectiveSpec& s : good) s.sequence = 18;
  for (const absl::Status& s : RunWithSpecs(good, &ring)) EXPECT_TRUE(s.ok()) << s;
}

TEST(RingFailure, ScalesOnIntegerCollectivesAreRejected) {
  std::vector<CollectiveSpec> specs(2, Spec(8, DType::kInt32));
  for (CollectiveSpec& s : specs) s.pre_scale = 0.5;
  for (const absl::Status& s : RunWithSpecs(specs)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

TEST(RingFailure, AnAbortFrameNamingARankOutsideTheRingFailsTheCollectiveAndGoesNoFurther) {
  MemoryRing ring(3);
  Frame forged;
  forged.kind = FrameKind::kAbort;
  forged.sender_rank = 0;
  forged.generation = 3;
  forged.sequence = 17;
  forged.abort_origin = 7;
  forged.abort_reason = "blame someone";
  ASSERT_TRUE(ring.link(0).Send(forged, {}, WaitLimit{SteadyDeadline(kTimeout)}).ok());

  CpuReducer reducer;
  Bytes buffer = testing::RandomInput(DType::kFloat32, 64, 1, 1);
  RingOptions options;
  options.timeout = absl::Seconds(1);
  const absl::Status s = RingAllReduce(RingMember{1, 3, 3}, ring.link(1), reducer, Spec(64),
                                       absl::MakeSpan(buffer), options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("abort frame naming rank 7, which is not in this ring of 3"));
  // Rank 1's own abort goes on to rank 2 (after its agreement frame), naming rank 1 —
  // the forged one is not forwarded.
  absl::StatusOr<ReceivedFrame> next;
  do {
    next = ring.link(2).Receive(WaitLimit{SteadyDeadline(kTimeout)});
    ASSERT_TRUE(next.ok()) << next.status();
  } while (next->frame.kind != FrameKind::kAbort);
  EXPECT_EQ(next->frame.abort_origin, 1);
}

}  // namespace
}  // namespace ringsync
