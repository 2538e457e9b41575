// Specification of the ring scatter: rank r ends with block r of the root's buffer, the
// root sending each other rank's block once and every hop only the blocks of the ranks
// after it; ranks that disagree, or a buffer that is not one block per rank, fail every
// rank with the buffers as they were.
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_scatter.h"
#include "core/ring/schedule.h"
#include "core/testing/ring_specs.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;
using testing::SmallSegments;

CollectiveSpec ScatterSpec(DType dtype, size_t count, int root) {
  return testing::Spec(CollectiveKind::kScatter, dtype, count, root);
}

struct ScatterRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  std::vector<RingStats> stats;
};

// One scatter with `specs[r]` on rank r over `inputs`.
ScatterRun RunScatter(const std::vector<CollectiveSpec>& specs, const std::vector<Bytes>& inputs,
                      const RingOptions& options = SmallSegments()) {
  const int n = static_cast<int>(inputs.size());
  ScatterRun run{{}, inputs, std::vector<RingStats>(static_cast<size_t>(n))};
  MemoryRing ring(n);
  run.statuses = SpawnRanks(n, [&](int r) {
    return RingScatter({r, n, 0}, ring.link(r), specs[r], absl::MakeSpan(run.buffers[r]), options,
                       &run.stats[r]);
  });
  return run;
}

Bytes BlockOf(const Bytes& buffer, size_t block_bytes, int r) {
  return Bytes(buffer.begin() + r * block_bytes, buffer.begin() + (r + 1) * block_bytes);
}

TEST(RingScatter, EveryRankEndsWithItsBlockOfTheRootsBufferForEveryRoot) {
  for (int n = 1; n <= 6; ++n) {
    for (int root = 0; root < n; ++root) {
      for (DType dtype : {DType::kFloat32, DType::kInt8, DType::kFloat64}) {
        for (size_t block : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
          SCOPED_TRACE(absl::StrCat("n ", n, " root ", root, " ", DTypeName(dtype), " block ",
                                    block));
          const size_t count = block * n;
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(dtype, count, r, 6));
          const ScatterRun run = RunScatter(
              std::vector<CollectiveSpec>(n, ScatterSpec(dtype, count, root)), inputs);
          const size_t block_bytes = block * DTypeSize(dtype);
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
            EXPECT_TRUE(BlockOf(run.buffers[r], block_bytes, r) ==
                        BlockOf(inputs[root], block_bytes, r))
                << "rank " << r << "'s block";
            // The rank d hops on sends the blocks of the N-1-d ranks after it, once each.
            const int distance = RingMod(r - root, n);
            EXPECT_EQ(run.stats[r].bytes_sent, (n - 1 - distance) * block_bytes) << "rank " << r;
          }
          EXPECT_TRUE(run.buffers[root] == inputs[root]) << "the root's buffer is as it was";
        }
      }
    }
  }
}

TEST(RingScatter, ForwardsEachBlockSegmentBySegmentInDefaultSegmentsToo) {
  // Blocks of 1 MiB in the default segments: the chain's own cut (an eighth, >= 128 KiB).
  const int n = 4;
  const size_t count = n * (size_t{1} << 18);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 8));
  const ScatterRun run = RunScatter(
      std::vector<CollectiveSpec>(n, ScatterSpec(DType::kFloat32, count, 1)), inputs,
      RingOptions{});
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    EXPECT_TRUE(BlockOf(run.buffers[r], count, r) == BlockOf(inputs[1], count, r)) << r;
  }
  // Three blocks of eight segments each leave the root, besides its agreement and commit.
  EXPECT_GE(run.stats[1].frames_sent, 24u);
}

TEST(RingScatter, RanksDisagreeingOnTheRootAllFailWithTheirBuffersAsTheyWere) {
  const int n = 4;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, 64, r, 3));
  std::vector<CollectiveSpec> specs;
  for (int r = 0; r < n; ++r) specs.push_back(ScatterSpec(DType::kFloat32, 64, r == 2 ? 1 : 0));
  const ScatterRun run = RunScatter(specs, inputs);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr("root")) << run.statuses[r];
    EXPECT_TRUE(run.buffers[r] == inputs[r]) << "rank " << r;
    EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
  }
}

TEST(RingScatter, ABufferThatIsNotOneBlockPerRankIsRefusedOnEveryRank) {
  const int n = 3;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, 10, r, 4));
  const ScatterRun run =
      RunScatter(std::vector<CollectiveSpec>(n, ScatterSpec(DType::kFloat32, 10, 0)), inputs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(run.statuses[r])) << run.statuses[r];
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr("scatter of 10 elements: not one block for each of 3 ranks"));
    EXPECT_TRUE(run.buffers[r] == inputs[r]) << "rank " << r;
  }
}

}  // namespace
}  // namespace ringsync
