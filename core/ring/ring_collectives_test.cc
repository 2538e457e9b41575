// Specification of all-gather, broadcast, barrier and reduce-scatter over the ring.
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allgather.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/partition.h"
#include "core/ring/ring_broadcast.h"
#include "core/testing/ring_specs.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;
using testing::SmallSegments;
using testing::Spec;

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

TEST(RingAllGather, AMismatchLeavesEveryBufferAsItWasAndSaysSo) {
  const int n = 3;
  std::vector<Bytes> buffers, inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, n * 5, r, 4));
    buffers.push_back(inputs.back());
  }
  MemoryRing ring(n);
  std::vector<RingStats> stats(n);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
    CollectiveSpec spec = Spec(CollectiveKind::kAllGather, DType::kFloat32, 5);
    if (r == 2) spec.name = "other";
    return RingAllGatherFromFirstSlot({r, n, 0}, ring.link(r), spec, absl::MakeSpan(buffers[r]),
                                      SmallSegments(), &stats[r]);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_TRUE(buffers[r] == inputs[r]) << "rank " << r << "'s buffer changed";
    // What the worker tells a client of a registered buffer (RegisteredBufferUntouched).
    EXPECT_TRUE(stats[r].buffer_untouched) << "rank " << r;
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

// A link whose frames cost more than the memory link's: it says so, and passes all else on.
class CostlyFramesLink final : public Link {
 public:
  CostlyFramesLink(Link& inner, size_t min_segment_bytes)
      : inner_(inner), min_segment_bytes_(min_segment_bytes) {}
  absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit) override {
    return inner_.Send(frame, payload, limit);
  }
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    return inner_.Receive(limit);
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override { return inner_.Peek(limit); }
  uint64_t newest_aborted_sequence() const override { return inner_.newest_aborted_sequence(); }
  size_t queued_frames() const override { return inner_.queued_frames(); }
  size_t min_useful_segment_bytes() const override { return min_segment_bytes_; }

 private:
  Link& inner_;
  const size_t min_segment_bytes_;
};

TEST(RingBroadcast, TheChainCutsABufferIntoPiecesEnoughThatItsHopsOverlapAndTheirFillIsSmall) {
  constexpr size_t kMiB = size_t{1} << 20;
  constexpr size_t k128KiB = size_t{128} << 10;
  EXPECT_EQ(BroadcastPieces(2), 8u) << "one hop: no fill, but the receiver still overlaps";
  EXPECT_EQ(BroadcastPieces(3), 32u) << "32 pieces a hop of fill";
  EXPECT_EQ(BroadcastPieces(4), 64u);
  EXPECT_EQ(BroadcastPieces(6), 128u);

  EXPECT_EQ(ChainSegmentBytes(16 * kMiB, 64, k128KiB, kMiB), kMiB / 4) << "a 64th";
  EXPECT_EQ(ChainSegmentBytes(4 * kMiB, 8, k128KiB, kMiB), kMiB / 2) << "an eighth";
  EXPECT_EQ(ChainSegmentBytes(128 * kMiB, 64, k128KiB, kMiB), kMiB) << "never more than a segment";
  EXPECT_EQ(ChainSegmentBytes(kMiB, 64, k128KiB, kMiB), k128KiB)
      << "never less than the links' smallest useful segment";
  EXPECT_EQ(ChainSegmentBytes(4 << 10, 64, k128KiB, kMiB), k128KiB);
  EXPECT_EQ(ChainSegmentBytes(4 * kMiB, 64, kMiB, kMiB), kMiB) << "a link of costly frames";
  EXPECT_EQ(ChainSegmentBytes(kMiB, 64, k128KiB, 40), 40u) << "the ring's own segment bounds it";

  // Data frames the root sends for a 1 MiB buffer (agreement and commit frames alike for
  // every size): eight segments of 128 KiB, seven more than a buffer of 128 KiB — unless
  // one link of the ring, not the root's, says a frame is worth no less than 1 MiB: every
  // rank then cuts the buffer no finer, as the agreement told each of them.
  const int n = 3;
  auto root_frames = [&](size_t bytes, int costly_rank) {
    const size_t count = bytes / sizeof(float);
    std::vector<Bytes> buffers;
    for (int r = 0; r < n; ++r) buffers.push_back(testing::RandomInput(DType::kFloat32, count, r, 5));
    const Bytes expected = buffers[0];
    MemoryRing ring(n);
    std::optional<CostlyFramesLink> costly;
    if (costly_rank >= 0) costly.emplace(ring.link(costly_rank), kMiB);
    const CollectiveSpec spec = Spec(CollectiveKind::kBroadcast, DType::kFloat32, count);
    std::vector<RingStats> stats(n);
    std::vector<absl::Status> statuses = SpawnRanks(n, [&](int r) {
      Link& link = r == costly_rank ? *costly : ring.link(r);
      return RingBroadcast({r, n, 0}, link, spec, absl::MakeSpan(buffers[r]), RingOptions{},
                           &stats[r]);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(statuses[r].ok()) << statuses[r];
      EXPECT_TRUE(buffers[r] == expected) << "rank " << r;
    }
    return stats[0].frames_sent;
  };
  const uint64_t whole = root_frames(k128KiB, /*costly_rank=*/-1);
  EXPECT_EQ(root_frames(kMiB, -1), whole + 7);
  EXPECT_EQ(root_frames(kMiB, 2), whole) << "the costly link's rank is two hops from the root";
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

// Reduce-scatter: rank r ends with block r of the ranks' inputs reduced, bitwise the
// all-reduce's chunk r, having moved (N-1)/N x S bytes, half of an all-reduce's; an
// input that is not one block per rank is refused on every rank.

CollectiveSpec ReduceScatterSpec(DType dtype, ReduceOp op, size_t count) {
  CollectiveSpec spec = Spec(CollectiveKind::kReduceScatter, dtype, count);
  spec.op = op;
  return spec;
}

// Every rank's buffer after one collective of `kind` over `inputs` on a ring of their
// number, with each rank's stats.
struct RingRun {
  std::vector<absl::Status> statuses;
  std::vector<Bytes> buffers;
  std::vector<RingStats> stats;
};
RingRun RunRing(CollectiveKind kind, const CollectiveSpec& base, const std::vector<Bytes>& inputs) {
  const int n = static_cast<int>(inputs.size());
  RingRun run{{}, inputs, std::vector<RingStats>(static_cast<size_t>(n))};
  MemoryRing ring(n);
  CollectiveSpec spec = base;
  spec.kind = kind;
  run.statuses = SpawnRanks(n, [&](int r) {
    CpuReducer reducer;
    const RingMember me{r, n, 0};
    auto buffer = absl::MakeSpan(run.buffers[r]);
    return kind == CollectiveKind::kReduceScatter
               ? RingReduceScatter(me, ring.link(r), reducer, spec, buffer, SmallSegments(),
                                   &run.stats[r])
               : RingAllReduce(me, ring.link(r), reducer, spec, buffer, SmallSegments(),
                               &run.stats[r]);
  });
  return run;
}

TEST(RingReduceScatter, EachRankEndsWithItsBlockBitwiseTheAllReducesResult) {
  for (int n = 1; n <= 5; ++n) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat64, DType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        for (size_t block : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
          SCOPED_TRACE(absl::StrCat("n ", n, " ", DTypeName(dtype), " ", ReduceOpName(op),
                                    " block ", block));
          const size_t count = block * n;
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(dtype, count, r, 11));
          const CollectiveSpec spec = ReduceScatterSpec(dtype, op, count);
          const RingRun all = RunRing(CollectiveKind::kAllReduce, spec, inputs);
          const RingRun scattered = RunRing(CollectiveKind::kReduceScatter, spec, inputs);
          const size_t esize = DTypeSize(dtype);
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(all.statuses[r].ok()) << all.statuses[r];
            ASSERT_TRUE(scattered.statuses[r].ok()) << scattered.statuses[r];
            const ElementRange mine = ChunkRange(count, n, r);
            EXPECT_EQ(mine.offset, r * block);
            const Bytes got(scattered.buffers[r].begin() + mine.offset * esize,
                            scattered.buffers[r].begin() + mine.end() * esize);
            const Bytes want(all.buffers[r].begin() + mine.offset * esize,
                             all.buffers[r].begin() + mine.end() * esize);
            EXPECT_TRUE(got == want) << "rank " << r << "'s block";
          }
        }
      }
    }
  }
}

TEST(RingReduceScatter, EachRankMovesHalfTheBytesOfAnAllReduce) {
  const int n = 4;
  const size_t count = 4000;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 2));
  const CollectiveSpec spec =
      ReduceScatterSpec(DType::kFloat32, ReduceOp::kSum, count);
  const RingRun all = RunRing(CollectiveKind::kAllReduce, spec, inputs);
  const RingRun scattered = RunRing(CollectiveKind::kReduceScatter, spec, inputs);
  for (int r = 0; r < n; ++r) {
    // Payload bytes: N-1 steps of one block (S/N), against 2(N-1) for the all-reduce.
    EXPECT_EQ(scattered.stats[r].bytes_sent, (n - 1) * count / n * sizeof(float)) << "rank " << r;
    EXPECT_EQ(all.stats[r].bytes_sent, 2 * (n - 1) * count / n * sizeof(float)) << "rank " << r;
  }
}

TEST(RingReduceScatter, AnInputThatIsNotOneBlockPerRankIsRefusedOnEveryRank) {
  const int n = 3;
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, 10, r, 4));
  const RingRun run = RunRing(CollectiveKind::kReduceScatter,
                          ReduceScatterSpec(DType::kFloat32, ReduceOp::kSum, 10),
                          inputs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(run.statuses[r])) << run.statuses[r];
    EXPECT_THAT(std::string(run.statuses[r].message()),
                HasSubstr("10 elements are not a multiple of this ring's 3 ranks"));
    EXPECT_TRUE(run.buffers[r] == inputs[r]) << "rank " << r << "'s input is untouched";
  }
}

}  // namespace
}  // namespace ringsync
