// The peer benchmarks' shared sweep (bench/peer_sweep.h): the sizes a command line expands
// to, that #wrong counts exactly the elements that differ from the expected result, and
// that the sweep checks each collective's result.
#include "bench/peer_sweep.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::bench {
namespace {

PeerSweep Sweep(int64_t min_bytes, int64_t max_bytes, int64_t step_factor) {
  return {min_bytes, max_bytes, step_factor, 20, 5, "float32", "sum", true};
}

TEST(SweepCounts, StepsFromMinToMaxInclusive) {
  EXPECT_EQ(SweepCounts(Sweep(16 << 20, 256 << 20, 4), sizeof(float)),
            (std::vector<size_t>{4 << 20, 16 << 20, 64 << 20}));
}

TEST(SweepCounts, SizesBelowOneElementBecomeOneElementListedOnce) {
  EXPECT_EQ(SweepCounts(Sweep(1, 64, 2), sizeof(double)), (std::vector<size_t>{1, 2, 4, 8}));
}

TEST(SweepCounts, StopsBeforeTheNextSizeWouldOverflow) {
  EXPECT_EQ(SweepCounts(Sweep(int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40), 1),
            (std::vector<size_t>{size_t{1} << 40}));
}

// Every rank's inputs summed in rank order: what an exact all-reduce leaves on every rank.
template <typename T>
std::vector<T> ExactSum(size_t count, int nranks) {
  std::vector<T> sum(count, 0), input(count);
  for (int r = 0; r < nranks; ++r) {
    FillInputs(input.data(), count, r);
    for (size_t i = 0; i < count; ++i) sum[i] += input[i];
  }
  return sum;
}

TEST(CountWrong, AnExactSumHasNoWrongElements) {
  for (int nranks : {2, 3, 4, 16, 64}) {
    const std::vector<float> sum = ExactSum<float>(1000, nranks);
    EXPECT_EQ(CountWrong(sum.data(), sum.size(), nranks, "sum"), 0) << nranks << " ranks";
  }
}

TEST(CountWrong, CountsEachElementThatDiffers) {
  std::vector<float> sum = ExactSum<float>(1000, 4);
  sum[0] += 1;
  sum[999] = -sum[999] + 0.5f;
  EXPECT_EQ(CountWrong(sum.data(), sum.size(), 4, "sum"), 2);
}

TEST(CountWrong, OneRanksInputIsNotTheSum) {
  std::vector<int64_t> input(100);
  FillInputs(input.data(), input.size(), 0);
  EXPECT_GT(CountWrong(input.data(), input.size(), 4, "sum"), 0);
}

TEST(CountWrong, MinAndMaxOverRanks) {
  std::vector<int32_t> all(15);
  // With 5 ranks every element index sees all of -2..2 across the ranks.
  for (size_t i = 0; i < all.size(); ++i) all[i] = 2;
  EXPECT_EQ(CountWrong(all.data(), all.size(), 5, "max"), 0);
  EXPECT_EQ(CountWrong(all.data(), all.size(), 5, "min"), 15);
  for (size_t i = 0; i < all.size(); ++i) all[i] = -2;
  EXPECT_EQ(CountWrong(all.data(), all.size(), 5, "min"), 0);
}


TEST(CountWrong, FromAnElementOnIsThatBlockOfTheReduction) {
  const std::vector<float> sum = ExactSum<float>(1000, 4);
  for (size_t first : {0, 1, 14, 15, 998}) {
    EXPECT_EQ(CountWrong(sum.data() + first, sum.size() - first, 4, "sum", first), 0) << first;
  }
  EXPECT_GT(CountWrong(sum.data() + 1, 100, 4, "sum", 0), 0) << "the block at the wrong place";
}

TEST(CountNotFrom, ARanksOwnInputsMatchAndAnotherRanksDoNot) {
  std::vector<float> root(100);
  FillInputs(root.data(), root.size(), 0);
  EXPECT_EQ(CountNotFrom(root.data(), root.size(), 0), 0);
  EXPECT_GT(CountNotFrom(root.data(), root.size(), 1), 0);
}

TEST(BusFactor, IsWhatEachRankMovesPerByteOfResultAsNcclTests) {
  EXPECT_DOUBLE_EQ(BusFactorOf("allreduce", 4).value, 1.5);
  EXPECT_DOUBLE_EQ(BusFactorOf("broadcast", 4).value, 1.0);
  EXPECT_DOUBLE_EQ(BusFactorOf("allgather", 4).value, 0.75);
  EXPECT_DOUBLE_EQ(BusFactorOf("reducescatter", 4).value, 0.75);
  EXPECT_DOUBLE_EQ(BusFactorOf("alltoall", 4).value, 0.75);
  EXPECT_DOUBLE_EQ(BusFactorOf("alltoallv", 4).value, 0.9);  // all but 1 of 10 shares leave
  EXPECT_STREQ(BusFactorOf("allreduce", 4).formula, "2(N-1)/N");
}

// Rank 1 of a ring of `nranks` simulated in this process: its collectives write what the
// other ranks would have contributed, or, with `broken`, leave the data as it is.
template <typename T>
PeerCollectives<T> SimulatedPeer(int nranks, bool broken) {
  PeerCollectives<T> peer;
  peer.all_reduce = [nranks, broken](T* data, size_t count) {
    if (broken) return;
    for (size_t i = 0; i < count; ++i) {
      T sum = 0;
      for (int r = 0; r < nranks; ++r) sum += static_cast<T>(InputValue(r, i));
      data[i] = sum;
    }
  };
  peer.broadcast = [broken](T* data, size_t count) {
    if (!broken) FillInputs(data, count, 0);
  };
  peer.all_gather = [nranks, broken](const T* input, size_t count, T* output) {
    for (int r = 0; r < nranks; ++r) {
      if (r == 1 || broken) {
        std::copy(input, input + count, output + r * count);
      } else {
        FillInputs(output + r * count, count, r);
      }
    }
  };
  peer.all_to_all = [nranks, broken](const T* input, size_t count, T* output) {
    if (broken) {  // exchanges nothing: the output is the rank's own input
      std::copy(input, input + nranks * count, output);
      return;
    }
    for (int from = 0; from < nranks; ++from) {
      if (from == 1) {
        std::copy(input + count, input + 2 * count, output + count);
      } else {
        FillInputs(output + from * count, count, ExchangedBlockRank(from, 1));
      }
    }
  };
  peer.reduce_scatter = [nranks, broken](T* data, size_t count) {
    if (!broken) {  // rank 1's block of the sum, moved to the buffer's start (as Gloo's)
      for (size_t i = 0; i < count; ++i) {
        T sum = 0;
        for (int r = 0; r < nranks; ++r) sum += static_cast<T>(InputValue(r, count + i));
        data[i] = sum;
      }
    }
    return data;
  };
  peer.all_to_all_v = [nranks, broken](const T* input, const std::vector<uint64_t>& sends,
                                       T* output, const std::vector<uint64_t>& receives) {
    size_t in = 0, out = 0;
    for (int from = 0; from < nranks; ++from) {
      if (from == 1 && !broken) {  // its own block, from its input to its output
        std::copy(input + in, input + in + sends[1], output + out);
      } else if (!broken) {
        FillInputs(output + out, receives[from], ExchangedBlockRank(from, 1));
      }
      in += sends[from];
      out += receives[from];
    }
  };
  peer.barrier = [] {};
  peer.max_over_ranks = [](double v) { return v; };
  peer.sum_over_ranks = [](int64_t v) { return v; };
  return peer;
}

PeerSweep SmallSweep(const std::string& collective) {
  return {4, 4096, 4, 2, 1, "float32", "sum", true, collective};
}

TEST(RunSweep, ChecksEachCollectivesResultAgainstTheRanksInputs) {
  for (const std::string collective :
       {"allreduce", "broadcast", "allgather", "alltoall", "reducescatter", "alltoallv"}) {
    EXPECT_EQ(RunSweep(SmallSweep(collective), 1, 3, SimulatedPeer<float>(3, false), "test"), 0)
        << collective;
    EXPECT_GT(RunSweep(SmallSweep(collective), 1, 3, SimulatedPeer<float>(3, true), "test"), 0)
        << collective << ": a peer that leaves rank 1's own data is caught";
  }
}

// ringsync's all-to-all runs in place: one that exchanged nothing leaves each rank its own
// input, whose every block but the rank's own must differ from the result at any length.
TEST(ExchangedBlockRank, AnAllToAllThatExchangedNothingIsCaughtAtAnyBlockLength) {
  for (int nranks = 2; nranks <= 5; ++nranks) {
    for (size_t block = 1; block <= 10; ++block) {
      for (int rank = 0; rank < nranks; ++rank) {
        std::vector<float> kept(block);
        int64_t wrong = 0;
        for (int from = 0; from < nranks; ++from) {
          FillInputs(kept.data(), block, ExchangedBlockRank(rank, from));  // rank's own block
          wrong += CountNotFrom(kept.data(), block, ExchangedBlockRank(from, rank));
        }
        EXPECT_EQ(wrong, static_cast<int64_t>((nranks - 1) * block))
            << nranks << " ranks, rank " << rank << ", blocks of " << block;
      }
    }
  }
}

TEST(AllToAllVCounts, EveryRankSendsAndReceivesTheCountInBlocksThatDiffer) {
  for (int nranks = 1; nranks <= 6; ++nranks) {
    const uint64_t count = 7 * static_cast<uint64_t>(AllToAllVShares(nranks));
    for (int rank = 0; rank < nranks; ++rank) {
      const std::vector<uint64_t> sends = AllToAllVCounts(rank, nranks, count);
      const std::vector<uint64_t> receives = AllToAllVReceiveCounts(rank, nranks, count);
      EXPECT_EQ(std::accumulate(sends.begin(), sends.end(), uint64_t{0}), count);
      EXPECT_EQ(std::accumulate(receives.begin(), receives.end(), uint64_t{0}), count);
      EXPECT_EQ(sends[rank], 7u) << "its own block is the smallest";
      EXPECT_EQ(std::set<uint64_t>(sends.begin(), sends.end()).size(), static_cast<size_t>(nranks));
    }
  }
}

TEST(RunSweep, APeerWithoutTheCollectiveIsRefused) {
  PeerCollectives<float> peer = SimulatedPeer<float>(2, false);
  peer.broadcast = nullptr;
  EXPECT_EQ(RunSweep(SmallSweep("broadcast"), 1, 2, peer, "test"), -1);
}

}  // namespace
}  // namespace ringsync::bench
