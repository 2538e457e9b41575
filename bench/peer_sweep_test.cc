// The peer benchmarks' shared sweep (bench/peer_sweep.h): the sizes a command line expands
// to, and that #wrong counts exactly the elements that differ from the expected result.
#include "bench/peer_sweep.h"

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

}  // namespace
}  // namespace ringsync::bench
