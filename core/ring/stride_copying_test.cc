// Specification of the small broadcasts, scatters, gathers and all-gathers over stride
// links: every rank ends with what the ring's algorithm for the kind gives it, in the
// same buffer layout, for every schedule, ring size and root; only the root's data
// travels where only the root's is needed; ranks that disagree fail with their buffers
// untouched; and the choice of schedule follows the all-reduce's for the same bytes.
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/link/memory_link.h"
#include "core/ring/stride_allreduce.h"
#include "core/ring/stride_copying.h"
#include "core/testing/ring_specs.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;
using testing::Spec;

constexpr std::byte kUntouched{0xEE};

struct CopyRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  std::vector<RingStats> stats;
};

// Rank r's buffer for `spec`'s kind: the gathers' N slots with rank r's input first (the
// rest kUntouched), else spec.count elements of rank r's input.
Bytes BufferOf(const CollectiveSpec& spec, int n, int r) {
  const Bytes input = testing::RandomInput(spec.dtype, spec.count, r, 11);
  if (!TraitsOf(spec.kind).gathers) return input;
  Bytes buffer(input.size() * static_cast<size_t>(n), kUntouched);
  std::copy(input.begin(), input.end(), buffer.begin());
  return buffer;
}

CopyRun RunCopy(StrideSchedule schedule, int n, const std::vector<CollectiveSpec>& specs) {
  CopyRun run{{}, {}, std::vector<RingStats>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) run.buffers.push_back(BufferOf(specs[r], n, r));
  MemoryStrideMesh mesh(n);
  run.statuses = SpawnRanks(n, [&](int r) {
    return StrideCopy(schedule, {r, n, 3}, mesh.links(r), specs[r],
                      absl::MakeSpan(run.buffers[r]), testing::SmallSegments(), &run.stats[r]);
  });
  return run;
}

Bytes Slice(const Bytes& b, size_t at, size_t size) {
  return Bytes(b.begin() + static_cast<ptrdiff_t>(at),
               b.begin() + static_cast<ptrdiff_t>(at + size));
}

class StrideCopying : public ::testing::TestWithParam<StrideSchedule> {};

TEST_P(StrideCopying, EveryRankEndsWithTheRingsResultForEveryKindRingSizeAndRoot) {
  for (int n = 2; n <= 6; ++n) {
    for (int root = 0; root < n; ++root) {
      for (CollectiveKind kind : {CollectiveKind::kBroadcast, CollectiveKind::kScatter,
                                  CollectiveKind::kGather, CollectiveKind::kAllGather,
                                  CollectiveKind::kAllToAll}) {
        for (size_t block : {size_t{0}, size_t{1}, size_t{9}}) {
          SCOPED_TRACE(absl::StrCat(CollectiveKindName(kind), " n ", n, " root ", root,
                                    " block ", block));
          const bool scatters =
              kind == CollectiveKind::kScatter || kind == CollectiveKind::kAllToAll;
          const CollectiveSpec spec =
              Spec(kind, DType::kFloat32, scatters ? block * n : block, root);
          const CopyRun run = RunCopy(GetParam(), n, std::vector<CollectiveSpec>(n, spec));
          const size_t slot = block * sizeof(float);
          const bool direct = GetParam() == StrideSchedule::kDirect;
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(run.statuses[r].ok()) << run.statuses[r];
            const Bytes& got = run.buffers[r];
            switch (kind) {
              case CollectiveKind::kBroadcast:
                EXPECT_TRUE(got == BufferOf(spec, n, root)) << "rank " << r;
                // Only the root's bytes travel: the others contribute nothing (the
                // doubling's ranks forward the root's on).
                if (direct && r != root) {
                  EXPECT_EQ(run.stats[r].bytes_sent, 0u) << "rank " << r;
                }
                break;
              case CollectiveKind::kScatter: {
                EXPECT_TRUE(Slice(got, r * slot, slot) ==
                            Slice(BufferOf(spec, n, root), r * slot, slot))
                    << "rank " << r << "'s block";
                Bytes others = BufferOf(spec, n, r);
                std::copy(got.begin() + r * slot, got.begin() + (r + 1) * slot,
                          others.begin() + r * slot);
                EXPECT_TRUE(got == others) << "rank " << r << ": the other blocks as they were";
                if (direct && r != root) {
                  EXPECT_EQ(run.stats[r].bytes_sent, 0u) << "rank " << r;
                }
                break;
              }
              case CollectiveKind::kAllToAll:
                // Block q is rank q's block r.
                for (int q = 0; q < n; ++q) {
                  EXPECT_TRUE(Slice(got, q * slot, slot) ==
                              Slice(BufferOf(spec, n, q), r * slot, slot))
                      << "rank " << r << " block " << q;
                }
                break;
              case CollectiveKind::kGather:
              case CollectiveKind::kAllGather:
                if (kind == CollectiveKind::kGather && r != root) {
                  EXPECT_TRUE(got == BufferOf(spec, n, r)) << "rank " << r << " untouched";
                  break;
                }
                for (int q = 0; q < n; ++q) {
                  EXPECT_TRUE(Slice(got, q * slot, slot) == Slice(BufferOf(spec, n, q), 0, slot))
                      << "rank " << r << " slot " << q;
                }
                break;
              default:
                break;
            }
          }
        }
      }
    }
  }
}

TEST_P(StrideCopying, RanksDisagreeingOnTheRootAllFailWithTheirBuffersUntouched) {
  const int n = 4;
  for (CollectiveKind kind : {CollectiveKind::kBroadcast, CollectiveKind::kScatter,
                              CollectiveKind::kGather}) {
    SCOPED_TRACE(CollectiveKindName(kind));
    std::vector<CollectiveSpec> specs;
    for (int r = 0; r < n; ++r) specs.push_back(Spec(kind, DType::kFloat32, 8, r == 2 ? 1 : 0));
    const CopyRun run = RunCopy(GetParam(), n, specs);
    for (int r = 0; r < n; ++r) {
      EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
      EXPECT_THAT(std::string(run.statuses[r].message()), HasSubstr("root")) << run.statuses[r];
      EXPECT_TRUE(run.buffers[r] == BufferOf(specs[r], n, r)) << "rank " << r;
      EXPECT_TRUE(run.stats[r].buffer_untouched) << "rank " << r;
    }
  }
}

TEST_P(StrideCopying, AScatterThatIsNotOneBlockPerRankIsRefusedOnEveryRank) {
  const int n = 3;
  const CopyRun run =
      RunCopy(GetParam(), n, std::vector<CollectiveSpec>(n, Spec(CollectiveKind::kScatter,
                                                                 DType::kFloat32, 10)));
  for (int r = 0; r < n; ++r) {
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr("scatter of 10 elements: not one block for each of 3 ranks"))
        << run.statuses[r];
  }
}

TEST_P(StrideCopying, ARankThatGivesUpBeforeRunningFailsTheOthersAndTheNextCollectiveRuns) {
  // Rank 1 refuses broadcast #1 (its client's arguments were bad, say) and goes straight
  // on to #2: its notice on every link reaches each rank before its frames of #2 do.
  const int n = 4;
  MemoryStrideMesh mesh(n);
  std::vector<Bytes> buffers;
  for (int r = 0; r < n; ++r) buffers.push_back(Bytes(16, std::byte(r)));
  std::vector<absl::Status> first(n), second(n);
  SpawnRanks(n, [&](int r) {
    const RingMember me{r, n, 3};
    CollectiveSpec one = Spec(CollectiveKind::kBroadcast, DType::kUInt8, 16, 0);
    CollectiveSpec two = one;
    two.sequence = 2;
    first[r] = r == 1 ? RejectOnEveryLink(me, mesh.links(r), StridesBeyondTheRing(GetParam(), n),
                                          one, testing::SmallSegments(),
                                          absl::InvalidArgumentError("a bad argument"))
                      : StrideCopy(GetParam(), me, mesh.links(r), one,
                                   absl::MakeSpan(buffers[r]), testing::SmallSegments());
    second[r] = StrideCopy(GetParam(), me, mesh.links(r), two, absl::MakeSpan(buffers[r]),
                           testing::SmallSegments());
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_THAT(std::string(first[r].message()), HasSubstr("a bad argument")) << first[r];
    if (r != 1) {
      EXPECT_THAT(std::string(first[r].message()), HasSubstr("rank 1 gave up")) << first[r];
    }
    EXPECT_TRUE(second[r].ok()) << "rank " << r << ": " << second[r];
    EXPECT_TRUE(buffers[r] == Bytes(16, std::byte{0})) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, StrideCopying,
                         ::testing::Values(StrideSchedule::kDirect, StrideSchedule::kDoubling),
                         [](const auto& info) {
                           return std::string(StrideScheduleName(info.param));
                         });

TEST(StrideScheduleToCopy, FollowsTheAllReducesChoiceForTheLargestContribution) {
  AlgorithmPolicy policy;
  policy.stride_links = true;
  const auto schedule = [&](CollectiveKind kind, size_t count, int n) {
    return StrideScheduleToCopy(Spec(kind, DType::kFloat32, count), n, policy);
  };
  EXPECT_EQ(schedule(CollectiveKind::kBroadcast, 1024, 4), StrideSchedule::kDirect);
  EXPECT_EQ(schedule(CollectiveKind::kGather, 1024, 8), StrideSchedule::kDoubling);
  EXPECT_EQ(schedule(CollectiveKind::kScatter, 1 << 20, 4), std::nullopt) << "4 MiB: the chain";
  EXPECT_EQ(schedule(CollectiveKind::kAllGather, 16, 2), std::nullopt) << "N=2: one hop anyway";
  EXPECT_EQ(schedule(CollectiveKind::kAllReduce, 16, 4), std::nullopt) << "not a copy";
  policy.stride_links = false;
  EXPECT_EQ(schedule(CollectiveKind::kBroadcast, 16, 4), std::nullopt) << "no stride links";
  policy.stride_links = true;
  policy.mode = AlgorithmPolicy::Mode::kRing;
  EXPECT_EQ(schedule(CollectiveKind::kBroadcast, 16, 4), std::nullopt) << "--algorithm=ring";
}

}  // namespace
}  // namespace ringsync
