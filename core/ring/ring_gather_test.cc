// Specification of the ring gather: the root ends with every rank's block in rank order,
// each rank sending its own block and those from behind it once, toward the root; ranks
// that disagree fail every rank with the buffers as they were.
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_gather.h"
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

CollectiveSpec GatherSpec(DType dtype, size_t count, int root) {
  return testing::Spec(CollectiveKind::kGather, dtype, count, root);
}

struct GatherRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  std::vector<RingStats> stats;
};

// One gather with `specs[r]` on rank r; rank r's buffer holds N slots of `inputs[r]`'s
// size, `inputs[r]` in the first and `filler` in the others.
GatherRun RunGather(const std::vector<CollectiveSpec>& specs, const std::vector<Bytes>& inputs,
                    const RingOptions& options = SmallSegments(),
                    std::byte filler = std::byte{0xEE}) {
  const int n = static_cast<int>(inputs.size());
  GatherRun run{{}, {}, std::vector<RingStats>(static_cast<size_t>(n))};
  for (const Bytes& input : inputs) {
    Bytes buffer(input.size() * n, filler);
    std::copy(input.begin(), input.end(), buffer.begin());
    run.buffers.push_back(std::move(buffer));
  }
  MemoryRing ring(n);
  run.statuses = SpawnRanks(n, [&](int r) {
    return RingGatherFromFirstSlot({r, n, 0}, ring.link(r), specs[r],
                                   absl::MakeSpan(run.buffers[r]), options, &run.stats[r]);
  });
  return run;
}

Bytes SlotOf(const Bytes& buffer, size_t slot_bytes, int slot) {
  return Bytes(buffer.begin() + slot * slot_bytes, buffer.begin() + (slot + 1) * slot_bytes);
}

TEST(RingGather, TheRootEndsWithEveryRanksBlockInRankOrderForEveryRoot) {
  for (int n = 1; n <= 6; ++n) {
    for (int root = 0; root < n; ++root) {
      for (DType dtype : {DType::kFloat32, DType::kInt8, DType::kFloat64}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
          SCOPED_TRACE(absl::StrCat("n ", n, " root ", root, " ", DTypeName(dtype), " count ",
                                    count));
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(dtype, count, r, 6));
          const GatherRun run = RunGather(
              std::vector<CollectiveSpec>(n, GatherSpec(dtype, count, root)), inputs);
          const size_t slot_bytes = count * DTypeSize(dtype);
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
            EXPECT_TRUE(SlotOf(run.buffers[root], slot_bytes, r) == inputs[r])
                << "rank " << r << "'s block at the root";
            // The rank d hops after the root sends its own block and the d-1 from behind it.
            const int distance = RingMod(r - root, n);
            EXPECT_EQ(run.stats[r].bytes_sent, distance * slot_bytes) << "rank " << r;
            EXPECT_TRUE(SlotOf(run.buffers[r], slot_bytes, r) == inputs[r])
                << "rank " << r << "'s input in its slot";
          }
          if (n > 1) {
            EXPECT_EQ(run.stats[root].bytes_received, (n - 1) * slot_bytes);
          }
        }
      }
    }
  }
}

TEST(RingGather, ARankOtherThanTheRootHoldsOnlyTheBlocksThatPassedThroughIt) {
  // The rank d hops after the root: the blocks of ranks root+1..root+d in their slots; the
  // others as the caller left them (but the first, whose input moved to its own slot).
  const int n = 5;
  const int root = 3;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, 9, r, 5));
  const GatherRun run =
      RunGather(std::vector<CollectiveSpec>(n, GatherSpec(DType::kFloat32, 9, root)), inputs);
  const size_t slot_bytes = 9 * sizeof(float);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    const int distance = RingMod(r - root, n);
    if (distance == 0) continue;
    for (int slot = 1; slot < n; ++slot) {
      const int hops = RingMod(slot - root, n);
      const bool passed = hops >= 1 && hops <= distance;
      EXPECT_TRUE(SlotOf(run.buffers[r], slot_bytes, slot) ==
                  (passed ? inputs[slot] : Bytes(slot_bytes, std::byte{0xEE})))
          << "rank " << r << " slot " << slot;
    }
  }
}

TEST(RingGather, ForwardsEachBlockSegmentBySegmentInDefaultSegmentsToo) {
  // Blocks of 1 MiB in the default segments: the chain's own cut (an eighth, >= 128 KiB).
  const int n = 4;
  const size_t count = size_t{1} << 18;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 8));
  const GatherRun run = RunGather(
      std::vector<CollectiveSpec>(n, GatherSpec(DType::kFloat32, count, 2)), inputs, RingOptions{});
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
    EXPECT_TRUE(SlotOf(run.buffers[2], count * sizeof(float), r) == inputs[r]) << r;
  }
  // The last rank before the root sends three blocks of eight segments each.
  EXPECT_GE(run.stats[1].frames_sent, 24u);
}

TEST(RingGather, RanksDisagreeingOnTheRootAllFailWithTheirBuffersAsTheyWere) {
  const int n = 4;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, 16, r, 3));
  std::vector<CollectiveSpec> specs;
  for (int r = 0; r < n; ++r) specs.push_back(GatherSpec(DType::kFloat32, 16, r == 2 ? 1 : 0));
  const GatherRun run = RunGather(specs, inputs);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr("root")) << run.statuses[r];
    EXPECT_TRUE(SlotOf(run.buffers[r], 16 * sizeof(float), 0) == inputs[r]) << "rank " << r;
    for (int slot = 1; slot < n; ++slot) {
      EXPECT_TRUE(SlotOf(run.buffers[r], 16 * sizeof(float), slot) ==
                  Bytes(16 * sizeof(float), std::byte{0xEE}))
          << "rank " << r << " slot " << slot;
    }
    EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
  }
}

TEST(RingGather, ABufferThatIsNotOneSlotPerRankIsRefusedOnEveryRank) {
  const int n = 3;
  MemoryRing ring(n);
  std::vector<Bytes> held(n, Bytes(10 * sizeof(float)));
  const std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    return RingGatherFromFirstSlot({r, n, 0}, ring.link(r), GatherSpec(DType::kFloat32, 4, 0),
                                   absl::MakeSpan(held[r]), SmallSegments());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[r])) << statuses[r];
  }
}

}  // namespace
}  // namespace ringsync
