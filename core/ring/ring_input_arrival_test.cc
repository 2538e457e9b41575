// Specification of an all-reduce whose input is still arriving when it starts
// (input_arrival.h): the ring reads no byte before it arrived, so the results are bit for
// bit those of an input that was there from the start, in whatever order the input lands;
// input that never arrives fails the collective on every rank by its deadline.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "core/link/memory_link.h"
#include "core/reduce/cpu_reducer.h"
#include "core/ring/input_arrival.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/schedule.h"
#include "core/testing/ring_test_data.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::RandomInput;

constexpr size_t kBlockBytes = 8192;

// A buffer whose input a copier thread writes block by block, in a given order, while
// the collective runs. Until a block is written it holds poison (all bits set: NaN), so
// a ring that read it early would not produce the reference sum.
class CopiedInLate : public InputArrival {
 public:
  CopiedInLate(absl::Span<std::byte> buffer, Bytes input)
      : buffer_(buffer), input_(std::move(input)),
        arrived_((buffer.size() + kBlockBytes - 1) / kBlockBytes, false) {
    std::fill(buffer_.begin(), buffer_.end(), std::byte{0xFF});
  }
  ~CopiedInLate() override {
    if (copier_.joinable()) copier_.join();
  }

  size_t blocks() const { return arrived_.size(); }

  // Copies the blocks of `order`, pausing between them, on a thread of its own.
  void StartCopy(std::vector<size_t> order, absl::Duration pause) {
    copier_ = std::thread([this, order = std::move(order), pause] {
      for (size_t block : order) {
        absl::SleepFor(pause);
        const size_t begin = block * kBlockBytes;
        const size_t size = std::min(kBlockBytes, buffer_.size() - begin);
        std::memcpy(buffer_.data() + begin, input_.data() + begin, size);
        absl::MutexLock lock(&mu_);
        arrived_[block] = true;
      }
    });
  }

  absl::Status AwaitBytes(size_t offset, size_t size, const WaitLimit& limit) const override {
    if (size == 0) return absl::OkStatus();
    const size_t first = offset / kBlockBytes;
    const size_t last = (offset + size - 1) / kBlockBytes;
    auto all_in = [&] {
      mu_.AssertHeld();
      return std::all_of(arrived_.begin() + first, arrived_.begin() + last + 1,
                         [](bool in) { return in; });
    };
    absl::MutexLock lock(&mu_);
    return AwaitWithLimit(mu_, absl::Condition(&all_in), limit, "the input did not arrive");
  }

 private:
  const absl::Span<std::byte> buffer_;
  const Bytes input_;
  mutable absl::Mutex mu_;
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  std::thread copier_;
};

CollectiveSpec SumOf(size_t count) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.name = "arriving";
  spec.sequence = 1;
  spec.dtype = DType::kFloat32;
  spec.op = ReduceOp::kSum;
  spec.count = count;
  return spec;
}

std::vector<Bytes> Inputs(int n, size_t count) {
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(RandomInput(DType::kFloat32, count, r, 7));
  return inputs;
}

// Every rank's result with its input in its buffer from the start.
std::vector<Bytes> Reference(std::vector<Bytes> buffers, const CollectiveSpec& spec,
                             const RingOptions& options) {
  const int n = static_cast<int>(buffers.size());
  MemoryRing ring(n);
  const std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    return RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, spec,
                         absl::MakeSpan(buffers[rank]), options);
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  return buffers;
}

// The blocks of rank r's buffer in the order it first reads them.
std::vector<size_t> RingReadOrder(int rank, int n, const CollectiveSpec& spec, size_t blocks) {
  std::vector<size_t> order;
  std::vector<bool> taken(blocks, false);
  for (const ElementRange& chunk : AllReduceInputOrder(rank, n, spec.count)) {
    if (chunk.count == 0) continue;
    const size_t esize = DTypeSize(spec.dtype);
    for (size_t b = chunk.offset * esize / kBlockBytes;
         b <= (chunk.end() * esize - 1) / kBlockBytes; ++b) {
      if (!taken[b]) order.push_back(b);
      taken[b] = true;
    }
  }
  return order;
}

enum class Order { kAsTheRingReads, kBackToFront };

struct ArrivingRun {
  std::vector<Bytes> buffers;
  std::vector<absl::Status> statuses;
  std::vector<RingStats> stats;
};

// Each rank's input arrives in `order`, `pause` before each block, while its all-reduce
// runs; `stop_after` (if set) makes rank 2's copy stop there.
ArrivingRun RunWhileArriving(const std::vector<Bytes>& inputs, const CollectiveSpec& spec,
                             const RingOptions& options, Order order,
                             std::optional<size_t> stop_after = std::nullopt,
                             absl::Duration pause = absl::Microseconds(200)) {
  const int n = static_cast<int>(inputs.size());
  ArrivingRun run;
  run.buffers.assign(n, Bytes(inputs[0].size()));
  run.stats.resize(n);
  MemoryRing ring(n);
  run.statuses = SpawnRanks(n, [&](int rank) {
    CopiedInLate arriving(absl::MakeSpan(run.buffers[rank]), inputs[rank]);
    std::vector<size_t> blocks = RingReadOrder(rank, n, spec, arriving.blocks());
    if (order == Order::kBackToFront) std::reverse(blocks.begin(), blocks.end());
    if (stop_after.has_value() && rank == 2) blocks.resize(*stop_after);
    arriving.StartCopy(std::move(blocks), pause);
    RingOptions mine = options;
    mine.input_arrival = &arriving;
    CpuReducer reducer;
    return RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, spec,
                         absl::MakeSpan(run.buffers[rank]), mine, &run.stats[rank]);
  });
  return run;
}

void ExpectSameResults(const ArrivingRun& run, const std::vector<Bytes>& reference) {
  for (size_t r = 0; r < run.buffers.size(); ++r) {
    EXPECT_TRUE(run.statuses[r].ok()) << "rank " << r << ": " << run.statuses[r];
    EXPECT_TRUE(run.buffers[r] == reference[r]) << "rank " << r << " differs from the reference";
  }
}

RingOptions SmallSegments() {
  RingOptions options;
  options.segment_bytes = 4096;  // several segments per block and per chunk
  options.timeout = absl::Seconds(30);
  return options;
}

TEST(RingInputArrival, InputLandingInTheOrderTheRingReadsItGivesTheResultsOfInputPresentFromTheStart) {
  const CollectiveSpec spec = SumOf(40'003);
  const std::vector<Bytes> inputs = Inputs(4, spec.count);
  ExpectSameResults(RunWhileArriving(inputs, spec, SmallSegments(), Order::kAsTheRingReads),
                    Reference(inputs, spec, SmallSegments()));
}

TEST(RingInputArrival, InputLandingLastWhereTheRingReadsFirstGivesTheSameResults) {
  const CollectiveSpec spec = SumOf(40'003);
  const std::vector<Bytes> inputs = Inputs(3, spec.count);
  ExpectSameResults(RunWhileArriving(inputs, spec, SmallSegments(), Order::kBackToFront),
                    Reference(inputs, spec, SmallSegments()));
}

TEST(RingInputArrival, APreScaleWaitsForTheWholeInputAndGivesTheSameResults) {
  CollectiveSpec spec = SumOf(20'000);
  spec.pre_scale = 0.5;
  const std::vector<Bytes> inputs = Inputs(4, spec.count);
  ExpectSameResults(RunWhileArriving(inputs, spec, SmallSegments(), Order::kBackToFront),
                    Reference(inputs, spec, SmallSegments()));
}

TEST(RingInputArrival, ARingOfOneWaitsForTheWholeInput) {
  CollectiveSpec spec = SumOf(10'000);
  spec.op = ReduceOp::kAvg;
  const std::vector<Bytes> inputs = Inputs(1, spec.count);
  ExpectSameResults(RunWhileArriving(inputs, spec, SmallSegments(), Order::kBackToFront),
                    Reference(inputs, spec, SmallSegments()));
}

TEST(RingInputArrival, FewerElementsThanRanksStillArriveAndReduce) {
  const CollectiveSpec spec = SumOf(3);
  const std::vector<Bytes> inputs = Inputs(4, spec.count);
  ExpectSameResults(RunWhileArriving(inputs, spec, SmallSegments(), Order::kAsTheRingReads),
                    Reference(inputs, spec, SmallSegments()));
}

// The ring's first read waits for the block that lands last (back to front), at least
// 16 pauses after the start: each rank counts that wait (RingStats::input_wait, the
// worker's ringsync_input_wait_seconds_total).
TEST(RingInputArrival, TheTimeTheRingStoodWaitingForItsInputIsCounted) {
  const CollectiveSpec spec = SumOf(2 * 16 * kBlockBytes / 4);  // 16 blocks a chunk
  const std::vector<Bytes> inputs = Inputs(2, spec.count);
  const absl::Duration pause = absl::Milliseconds(2);
  const ArrivingRun run = RunWhileArriving(inputs, spec, SmallSegments(), Order::kBackToFront,
                                           std::nullopt, pause);
  ExpectSameResults(run, Reference(inputs, spec, SmallSegments()));
  for (size_t r = 0; r < run.stats.size(); ++r) {
    EXPECT_GE(run.stats[r].input_wait, 16 * pause) << "rank " << r;
  }
  RingStats present;
  std::vector<Bytes> buffers = inputs;
  MemoryRing ring(2);
  SpawnRanks(2, [&](int rank) {
    CpuReducer reducer;
    RingStats stats;
    absl::Status s = RingAllReduce(RingMember{rank, 2, 0}, ring.link(rank), reducer, spec,
                                   absl::MakeSpan(buffers[rank]), SmallSegments(), &stats);
    if (rank == 0) present = stats;
    return s;
  });
  EXPECT_EQ(present.input_wait, absl::ZeroDuration()) << "input present from the start";
}

TEST(RingInputArrival, InputThatStopsArrivingFailsEveryRankByTheDeadlineNamingTheWait) {
  const CollectiveSpec spec = SumOf(40'003);
  RingOptions options = SmallSegments();
  options.timeout = absl::Milliseconds(800);
  const ArrivingRun run =
      RunWhileArriving(Inputs(4, spec.count), spec, options, Order::kAsTheRingReads, 5);
  for (size_t r = 0; r < run.statuses.size(); ++r) {
    EXPECT_FALSE(run.statuses[r].ok()) << "rank " << r;
  }
  EXPECT_TRUE(absl::IsDeadlineExceeded(run.statuses[2])) << run.statuses[2];
  EXPECT_NE(run.statuses[2].message().find("rank 2"), std::string::npos) << run.statuses[2];
  EXPECT_NE(run.statuses[2].message().find("the input did not arrive"), std::string::npos)
      << run.statuses[2];
}

}  // namespace
}  // namespace ringsync
