// Specification of all-gather, broadcast and barrier over the ring.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allgather.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/ring_broadcast.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;

CollectiveSpec Spec(CollectiveKind kind, DType dtype, size_t count, int root = 0) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.name = std::string(CollectiveKindName(kind));
  spec.sequence = 1;
  spec.dtype = dtype;
  spec.count = count;
  spec.root = root;
  return spec;
}

RingOptions SmallSegments() {
  RingOptions options;
  options.segment_bytes = 40;
  options.timeout = absl::Seconds(10);
  return options;
}

TEST(RingAllGather, EveryRankEndsWithEveryContributionInRankOrder) {
  for (int n = 1; n <= 8; ++n) {
    for (DType dtype : {DType::kFloat32, DType::kInt8, DType::kFloat64}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}}) {
        SCOPED_TRACE(absl::StrCat("n ", n, " ", DTypeName(dtype), " count ", count));
        const size_t esize = DTypeSize(dtype);
        std::vector<Bytes> contributions, buffers;
        Bytes expected;
        for (int r = 0; r < n; ++r) {
          contributions.push_back(testing::RandomInput(dtype, count, r, 9));
          expected.insert(expected.end(), contributions[r].begin(), contributions[r].end());
          Bytes buffer(n * count * esize);
          std::copy(contributions[r].begin(), contributions[r].end(),
                    buffer.begin() + r * count * esize);
          buffers.push_back(buffer);
        }
        MemoryRing ring(n);
        const CollectiveSpec spec = Spec(CollectiveKind::kAllGather, dtype, count);
        std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
          return RingAllGather({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]),
                               SmallSegments());
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(statuses[r].ok()) << statuses[r];
          EXPECT_TRUE(buffers[r] == expected) << "rank " << r;
        }
      }
    }
  }
}

TEST(RingAllGather, TakesTheContributionFromTheFirstSlotAsAClientSendsIt) {
  const int n = 4;
  const size_t count = 7;
  const size_t slot = count * DTypeSize(DType::kFloat32);
  std::vector<Bytes> buffers;
  Bytes expected;
  for (int r = 0; r < n; ++r) {
    const Bytes contribution = testing::RandomInput(DType::kFloat32, count, r, 3);
    expected.insert(expected.end(), contribution.begin(), contribution.end());
    Bytes buffer(n * slot, std::byte{0x5a});
    std::copy(contribution.begin(), contribution.end(), buffer.begin());
    buffers.push_back(buffer);
  }
  MemoryRing ring(n);
  const CollectiveSpec spec = Spec(CollectiveKind::kAllGather, DType::kFloat32, count);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    return RingAllGatherFromFirstSlot({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]),
                                      SmallSegments());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_TRUE(buffers[r] == expected) << "rank " << r;
  }
}

TEST(RingBroadcast, RanksNamingDifferentRootsAllFailAtOnceQuotingBoth) {
  const int n = 4;
  std::vector<Bytes> buffers, inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, 100, r, 4));
    buffers.push_back(inputs.back());
  }
  MemoryRing ring(n);
  RingOptions options = SmallSegments();
  options.timeout = absl::Seconds(30);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    // Rank 1 thinks it is the root; the others that rank 0 is.
    const CollectiveSpec spec = Spec(CollectiveKind::kBroadcast, DType::kFloat32, 100, r == 1);
    return RingBroadcast({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]), options);
  });
  for (int r = 0; r < n; ++r) {
    // Not the deadline: a mismatch, found before any data moved.
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("from root 1")) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("from root 0")) << statuses[r];
    EXPECT_TRUE(buffers[r] == inputs[r]) << "rank " << r << "'s buffer changed";
  }
}

TEST(RingAllGather, AMismatchLeavesEveryBufferAsItWas) {
  const int n = 3;
  std::vector<Bytes> buffers, inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, n * 5, r, 4));
    buffers.push_back(inputs.back());
  }
  MemoryRing ring(n);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CollectiveSpec spec = Spec(CollectiveKind::kAllGather, DType::kFloat32, 5);
    if (r == 2) spec.name = "other";
    return RingAllGatherFromFirstSlot({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]),
                                      SmallSegments());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_TRUE(buffers[r] == inputs[r]) << "rank " << r << "'s buffer changed";
  }
}

TEST(RingBroadcast, EveryRankEndsWithTheRootsBufferForEveryRoot) {
  for (int n = 1; n <= 8; ++n) {
    for (int root = 0; root < n; ++root) {
      for (size_t count : {size_t{0}, size_t{3}, size_t{777}}) {
        SCOPED_TRACE(absl::StrCat("n ", n, " root ", root, " count ", count));
        std::vector<Bytes> buffers;
        for (int r = 0; r < n; ++r) buffers.push_back(testing::RandomInput(DType::kFloat32, count, r, 4));
        const Bytes expected = buffers[root];
        MemoryRing ring(n);
        const CollectiveSpec spec = Spec(CollectiveKind::kBroadcast, DType::kFloat32, count, root);
        std::vector<RingStats> stats(n);
        std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
          return RingBroadcast({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]),
                               SmallSegments(), &stats[r]);
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(statuses[r].ok()) << statuses[r];
          EXPECT_TRUE(buffers[r] == expected) << "rank " << r;
        }
        if (n > 1) {
          EXPECT_EQ(stats[root].bytes_sent, count * 4) << "the root sends its buffer once";
          EXPECT_EQ(stats[(root + n - 1) % n].bytes_sent, 0u) << "the chain ends before the root";
        }
      }
    }
  }
}

TEST(RingBroadcast, RanksDisagreeingOnTheRootAllFailIncludingTheRoot) {
  const int n = 4;
  MemoryRing ring(n);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    Bytes buffer(64 * 4);
    const CollectiveSpec spec =
        Spec(CollectiveKind::kBroadcast, DType::kFloat32, 64, r == 2 ? 1 : 0);
    return RingBroadcast({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffer), SmallSegments());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("root")) << statuses[r];
  }
}

TEST(RingBarrier, IsAZeroElementCollectiveThatReturnsOnlyWhenEveryRankArrived) {
  const int n = 5;
  MemoryRing ring(n);
  std::atomic<int> arrived{0};
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    absl::SleepFor(absl::Milliseconds(20 * r));  // ranks arrive one after another
    ++arrived;
    CpuReducer reducer;
    absl::Status s = RingAllReduce({r, n, 0}, ring.link(r), reducer,
                                   Spec(CollectiveKind::kBarrier, DType::kUInt8, 0), {},
                                   SmallSegments());
    if (s.ok() && arrived.load() != n) {
      return absl::InternalError(absl::StrCat("left the barrier with ", arrived.load(), " arrived"));
    }
    return s;
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(RingCollectives, ACancellationFromOutsideAbortsEveryRankWithItsReason) {
  const int n = 3;
  MemoryRing ring(n);
  Cancellation client_gone;
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    RingOptions options = SmallSegments();
    if (r == 1) {
      options.cancellation = &client_gone;
      client_gone.Cancel(absl::AbortedError("the training process of rank 1 disconnected"));
    }
    Bytes buffer(100000 * 4);
    return RingAllReduce({r, n, 0}, ring.link(r), reducer,
                         Spec(CollectiveKind::kAllReduce, DType::kFloat32, 100000), absl::MakeSpan(buffer),
                         options);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("training process of rank 1 disconnected")) << s;
  }
}

}  // namespace
}  // namespace ringsync
