// Specification of the ring all-reduce: N ranks as threads over in-memory links.
#include "core/ring/ring_allreduce.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/partition.h"
#include "core/testing/ring_test_data.h"
#include "core/ring/schedule.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::ExactInput;
using testing::GetElement;
using testing::RandomInput;
using testing::SetElement;

CollectiveSpec AllReduceSpec(DType dtype, ReduceOp op, size_t count) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.name = "test";
  spec.sequence = 1;
  spec.dtype = dtype;
  spec.op = op;
  spec.count = count;
  return spec;
}

struct RingRun {
  std::vector<Bytes> buffers;
  std::vector<absl::Status> statuses;
  std::vector<RingStats> stats;
  std::unique_ptr<MemoryRing> ring;
};

// Runs one all-reduce on every rank's buffer in place.
RingRun RunAllReduce(std::vector<Bytes> buffers, const CollectiveSpec& spec,
                     RingOptions options = {}, size_t capacity_frames = 4) {
  const int n = static_cast<int>(buffers.size());
  RingRun run;
  run.ring = std::make_unique<MemoryRing>(n, capacity_frames);
  run.buffers = std::move(buffers);
  run.stats.resize(n);
  run.statuses = SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    return RingAllReduce(RingMember{rank, n, 0}, run.ring->link(rank), reducer, spec,
                         absl::MakeSpan(run.buffers[rank]), options, &run.stats[rank]);
  });
  return run;
}

void ExpectAllOk(const RingRun& run) {
  for (size_t r = 0; r < run.statuses.size(); ++r) {
    EXPECT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
  }
}

void ExpectBitwiseIdentical(const RingRun& run) {
  for (size_t r = 1; r < run.buffers.size(); ++r) {
    EXPECT_TRUE(run.buffers[r] == run.buffers[0]) << "rank " << r << " differs from rank 0";
  }
}

TEST(RingAllReduce, SeedCaseFourRanksSumToFourSixSixEight) {
  const std::vector<std::vector<float>> inputs = {{1, 2, 3, 4}, {2, 2, 2, 2}, {0, 1, 0, 1}, {1, 1, 1, 1}};
  std::vector<Bytes> buffers;
  for (const auto& in : inputs) {
    Bytes b(in.size() * sizeof(float));
    std::memcpy(b.data(), in.data(), b.size());
    buffers.push_back(b);
  }
  RingRun run = RunAllReduce(buffers, AllReduceSpec(DType::kFloat32, ReduceOp::kSum, 4));
  ExpectAllOk(run);
  for (const Bytes& b : run.buffers) {
    std::vector<float> out(4);
    std::memcpy(out.data(), b.data(), b.size());
    EXPECT_EQ(out, (std::vector<float>{4, 6, 6, 8}));
  }
}

struct SweepCase {
  int world_size;
  DType dtype;
  ReduceOp op;
};

class RingAllReduceSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(RingAllReduceSweep, MatchesTheNaiveReferenceBitwiseOnEveryRankForManyCounts) {
  const auto [n, dtype, op] = GetParam();
  const size_t nn = static_cast<size_t>(n);
  for (size_t count : {size_t{0}, size_t{1}, nn - 1, nn, nn + 1, size_t{97}, size_t{1009}}) {
    SCOPED_TRACE(absl::StrCat("count ", count));
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(ExactInput(dtype, op, count, r, 17));
    RingOptions options;
    options.segment_bytes = 24;  // several segments per chunk: exercises the pipeline
    RingRun run = RunAllReduce(inputs, AllReduceSpec(dtype, op, count), options);
    ExpectAllOk(run);
    Bytes expected = testing::MakeBuffer(dtype, count);
    for (size_t i = 0; i < count; ++i) {
      std::vector<double> column;
      for (int r = 0; r < n; ++r) column.push_back(GetElement(dtype, inputs[r], i));
      SetElement(dtype, expected, i, testing::NaiveReduce(dtype, op, column));
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(run.buffers[r] == expected) << "rank " << r;
    }
  }
}

// The two sweeps below share one name for their cases, e.g. "N7_float32_sum".
std::string SweepCaseName(const ::testing::TestParamInfo<SweepCase>& info) {
  return absl::StrCat("N", info.param.world_size, "_", DTypeName(info.param.dtype), "_",
                      ReduceOpName(info.param.op));
}

// Rings on which every dtype meets every op (odd and even, a chunk per rank or not).
constexpr int kEveryDTypeAndOpRings[] = {3, 4, 5};

// Every dtype with every op: each type's combine and finalize in the ring's order.
std::vector<SweepCase> EveryDTypeAndOpCases() {
  std::vector<SweepCase> cases;
  for (int n : kEveryDTypeAndOpRings) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) cases.push_back({n, dtype, op});
    }
  }
  return cases;
}

// Every other ring size up to 16, for each element width (1, 2, 4 and 8 bytes) summed
// and averaged (AVG divides once the ring is done): the schedule, the partition and the
// pipeline's segments depend on N, the count and the element's size, not on which type
// of that size it is — the sweep above covers the types.
std::vector<SweepCase> EveryRingSizeCases() {
  std::vector<SweepCase> cases;
  for (int n = 1; n <= 16; ++n) {
    if (absl::c_linear_search(kEveryDTypeAndOpRings, n)) continue;
    for (DType dtype : {DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) cases.push_back({n, dtype, op});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryDTypeAndOp, RingAllReduceSweep,
                         ::testing::ValuesIn(EveryDTypeAndOpCases()), SweepCaseName);
INSTANTIATE_TEST_SUITE_P(EveryRingSize, RingAllReduceSweep,
                         ::testing::ValuesIn(EveryRingSizeCases()), SweepCaseName);

// Reference that follows the ring's exact order of combination: chunk c starts as rank
// c+1's contribution and passes through ranks c+2, c+3, ..., c, each combining its own
// data (dst) with the partial sum it received (src). Finalize then runs once per chunk.
Bytes RingOrderReference(const std::vector<Bytes>& inputs, const CollectiveSpec& spec) {
  const int n = static_cast<int>(inputs.size());
  const size_t esize = DTypeSize(spec.dtype);
  const ReduceSpec rspec{spec.dtype, spec.op, n, spec.pre_scale, spec.post_scale};
  CpuReducer reducer;
  Bytes out(inputs[0].size());
  for (int c = 0; c < n; ++c) {
    const ElementRange range = ChunkRange(spec.count, n, c);
    auto slice = [&](const Bytes& b) {
      Bytes part(b.begin() + range.offset * esize, b.begin() + range.end() * esize);
      ReduceStats ignored;
      EXPECT_TRUE(reducer.PreScale(rspec, part.data(), range.count, &ignored).ok());
      return part;
    };
    Bytes acc = slice(inputs[(c + 1) % n]);
    for (int k = 2; k <= n; ++k) {
      Bytes own = slice(inputs[(c + k) % n]);
      ReduceStats ignored;
      EXPECT_TRUE(reducer.Combine(rspec, own.data(), acc.data(), range.count, &ignored).ok());
      acc = std::move(own);
    }
    ReduceStats ignored;
    EXPECT_TRUE(reducer.Finalize(rspec, acc.data(), range.count, &ignored).ok());
    std::copy(acc.begin(), acc.end(), out.begin() + range.offset * esize);
  }
  return out;
}

TEST(RingAllReduce, RandomFloatsFollowTheRingOrderBitForBit) {
  for (int n : {2, 3, 5, 8, 16}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      for (ReduceOp op : kAllReduceOps) {
        SCOPED_TRACE(absl::StrCat("n ", n, " ", DTypeName(dtype), " ", ReduceOpName(op)));
        CollectiveSpec spec = AllReduceSpec(dtype, op, 4099);
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(RandomInput(dtype, spec.count, r, 5));
        RingOptions options;
        options.segment_bytes = 1000;
        RingRun run = RunAllReduce(inputs, spec, options);
        ExpectAllOk(run);
        ExpectBitwiseIdentical(run);
        EXPECT_TRUE(run.buffers[0] == RingOrderReference(inputs, spec));
      }
    }
  }
}

TEST(RingAllReduce, PreAndPostScaleApplyInTheWideType) {
  // float16 sums of 8 ranks of values near 10240 overflow float16 (max 65504) unless
  // each contribution is pre-scaled by 1/8. (10240/8 = 1280: every partial sum of
  // element 0 is a multiple of 1280 and so exact in float16.)
  const int n = 8;
  CollectiveSpec spec = AllReduceSpec(DType::kFloat16, ReduceOp::kSum, 333);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) {
    Bytes b = testing::MakeBuffer(DType::kFloat16, spec.count);
    for (size_t i = 0; i < spec.count; ++i) SetElement(DType::kFloat16, b, i, 10240 + i);
    inputs.push_back(b);
  }
  RingRun unscaled = RunAllReduce(inputs, spec);
  ExpectAllOk(unscaled);
  EXPECT_TRUE(std::isinf(GetElement(DType::kFloat16, unscaled.buffers[0], 0)));
  uint64_t overflows = 0;
  for (const RingStats& s : unscaled.stats) overflows += s.overflows;
  EXPECT_GT(overflows, 0u) << "overflow of a narrow type must be counted, not hidden";

  spec.pre_scale = 1.0 / n;  // each contribution ~1280: the sum stays in range
  RingRun averaged = RunAllReduce(inputs, spec);
  ExpectAllOk(averaged);
  ExpectBitwiseIdentical(averaged);
  EXPECT_TRUE(averaged.buffers[0] == RingOrderReference(inputs, spec));
  EXPECT_EQ(GetElement(DType::kFloat16, averaged.buffers[0], 0), 10240.0);

  spec.post_scale = 2.0;
  RingRun doubled = RunAllReduce(inputs, spec);
  ExpectAllOk(doubled);
  EXPECT_TRUE(doubled.buffers[0] == RingOrderReference(inputs, spec));
  EXPECT_EQ(GetElement(DType::kFloat16, doubled.buffers[0], 0), 20480.0);
}

TEST(RingAllReduce, NaNAndInfinityPropagateThroughTheRing) {
  const int n = 4;
  CollectiveSpec spec = AllReduceSpec(DType::kFloat32, ReduceOp::kSum, 8);
  std::vector<Bytes> inputs(n, testing::MakeBuffer(DType::kFloat32, 8));
  SetElement(DType::kFloat32, inputs[2], 1, std::nan(""));
  SetElement(DType::kFloat32, inputs[3], 5, INFINITY);
  SetElement(DType::kFloat32, inputs[0], 6, INFINITY);
  SetElement(DType::kFloat32, inputs[1], 6, -INFINITY);
  RingRun run = RunAllReduce(inputs, spec);
  ExpectAllOk(run);
  for (const Bytes& b : run.buffers) {
    EXPECT_TRUE(std::isnan(GetElement(DType::kFloat32, b, 1)));
    EXPECT_EQ(GetElement(DType::kFloat32, b, 5), INFINITY);
    EXPECT_TRUE(std::isnan(GetElement(DType::kFloat32, b, 6))) << "inf + -inf is NaN";
    EXPECT_EQ(GetElement(DType::kFloat32, b, 0), 0.0);
  }
}

TEST(RingAllReduce, EachRankSendsExactlyItsScheduledChunks) {
  for (int n : {2, 3, 4, 7}) {
    for (size_t count : {size_t{10}, size_t{4099}, size_t{100000}}) {
      CollectiveSpec spec = AllReduceSpec(DType::kFloat32, ReduceOp::kSum, count);
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(RandomInput(DType::kFloat32, count, r, 1));
      RingOptions options;
      options.segment_bytes = 4096;
      RingRun run = RunAllReduce(inputs, spec, options);
      ExpectAllOk(run);
      for (int r = 0; r < n; ++r) {
        uint64_t scheduled = 0;
        for (int t = 0; t < AllReduceSteps(n); ++t) {
          scheduled += ChunkRange(count, n, AllReduceStep(r, n, t).send_chunk).count * 4;
        }
        EXPECT_EQ(run.ring->bytes_sent(r), scheduled) << "n " << n << " rank " << r;
        EXPECT_EQ(run.stats[r].bytes_sent, scheduled);
        const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count * 4);
        EXPECT_NEAR(static_cast<double>(scheduled), ideal, 2.0 * (n - 1) * 4)
            << "2(N-1)/N of the buffer, up to chunk rounding";
      }
    }
  }
}

TEST(RingAllReduce, InFlightFramesStayWithinTheLinkCapacity) {
  const int n = 4;
  const size_t capacity = 3;
  CollectiveSpec spec = AllReduceSpec(DType::kFloat32, ReduceOp::kSum, 50000);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(RandomInput(DType::kFloat32, spec.count, r, 3));
  RingOptions options;
  options.segment_bytes = 1024;
  RingRun run = RunAllReduce(inputs, spec, options, capacity);
  ExpectAllOk(run);
  for (int r = 0; r < n; ++r) EXPECT_LE(run.ring->high_water_mark(r), capacity);
}

TEST(RingAllReduce, AMillionElementsAcrossFourAndSevenRanks) {
  for (int n : {4, 7}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
      SCOPED_TRACE(absl::StrCat("n ", n, " ", DTypeName(dtype)));
      CollectiveSpec spec = AllReduceSpec(dtype, ReduceOp::kSum, 1000003);
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(RandomInput(dtype, spec.count, r, 11));
      RingOptions options;
      options.segment_bytes = 64 * 1024;
      RingRun run = RunAllReduce(inputs, spec, options);
      ExpectAllOk(run);
      ExpectBitwiseIdentical(run);
      EXPECT_TRUE(run.buffers[0] == RingOrderReference(inputs, spec));
    }
  }
}

TEST(RingAllReduce, BackToBackCollectivesOnTheSameLinks) {
  const int n = 3;
  MemoryRing ring(n);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) -> absl::Status {
    CpuReducer reducer;
    for (uint64_t seq = 1; seq <= 200; ++seq) {
      CollectiveSpec spec = AllReduceSpec(DType::kInt32, ReduceOp::kSum, seq % 17);
      spec.sequence = seq;
      std::vector<int32_t> data(spec.count, rank + 1);
      auto bytes = absl::MakeSpan(reinterpret_cast<std::byte*>(data.data()), data.size() * 4);
      if (absl::Status s = RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, spec,
                                         bytes, RingOptions{});
          !s.ok()) {
        return s;
      }
      for (int32_t v : data) {
        if (v != 6) return absl::InternalError(absl::StrCat("seq ", seq, " got ", v));
      }
    }
    return absl::OkStatus();
  });
  for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace ringsync
