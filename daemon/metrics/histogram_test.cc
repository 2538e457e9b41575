// Histogram: inclusive upper bounds, cumulative buckets, +Inf, sum and count.
#include "daemon/metrics/histogram.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::metrics {
namespace {

using ::testing::ElementsAre;

TEST(Histogram, BoundsAreInclusiveAndBucketsCumulative) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 100.0}) h.Observe(v);
  const Histogram::Data data = h.Snapshot();
  EXPECT_THAT(data.cumulative, ElementsAre(2, 4, 5, 6));
  EXPECT_EQ(data.count, 6u);
  EXPECT_DOUBLE_EQ(data.sum, 0.05 + 0.1 + 0.5 + 1.0 + 5.0 + 100.0);
}

TEST(Histogram, NaNCountsOnlyInPlusInf) {
  Histogram h({1});
  h.Observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(h.Snapshot().cumulative, ElementsAre(0, 1));
}

TEST(Histogram, ConcurrentObservationsAreAllCounted) {
  Histogram h({1, 2});
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 10000; ++i) h.Observe(1.5);
      });
    }
  }
  const Histogram::Data data = h.Snapshot();
  EXPECT_THAT(data.cumulative, ElementsAre(0, 40000, 40000));
  EXPECT_DOUBLE_EQ(data.sum, 60000);
}

TEST(Histogram, SamplesAreBucketsWithLeThenSumAndCount) {
  Histogram h({0.5});
  h.Observe(0.25);
  std::vector<Sample> samples;
  h.AppendSamples({{"kind", "allreduce"}}, &samples);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].suffix, "_bucket");
  EXPECT_THAT(samples[0].labels,
              ElementsAre(std::pair<std::string, std::string>("kind", "allreduce"),
                          std::pair<std::string, std::string>("le", "0.5")));
  EXPECT_EQ(samples[1].labels.back().second, "+Inf");
  EXPECT_EQ(samples[2].suffix, "_sum");
  EXPECT_EQ(samples[2].value, 0.25);
  EXPECT_EQ(samples[3].suffix, "_count");
  EXPECT_EQ(samples[3].value, 1);
}

TEST(Histogram, ValidBoundsAreFiniteAndIncreasing) {
  EXPECT_TRUE(Histogram::ValidBounds({0.1, 1}));
  EXPECT_FALSE(Histogram::ValidBounds({}));
  EXPECT_FALSE(Histogram::ValidBounds({1, 1}));
  EXPECT_FALSE(Histogram::ValidBounds({2, 1}));
  EXPECT_FALSE(Histogram::ValidBounds({1, std::numeric_limits<double>::infinity()}));
}

}  // namespace
}  // namespace ringsync::metrics
