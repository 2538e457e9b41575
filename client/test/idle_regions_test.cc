// Which idle regions a client keeps between collectives: the smallest that fits serves
// the next collective, as many stay idle as were in use at once (however large), and
// only regions of sizes no longer used are dropped.
#include "client/src/idle_regions.h"

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

// A region as IdleRegions sees one: a size, and which region it is.
struct FakeRegion {
  size_t bytes = 0;
  int id = 0;
  size_t size() const { return bytes; }
};

// Makes FakeRegions, numbered in order, and counts them.
class Maker {
 public:
  auto Of(size_t bytes) {
    return [this, bytes]() -> absl::StatusOr<FakeRegion> { return FakeRegion{bytes, ++made_}; };
  }
  int made() const { return made_; }

 private:
  int made_ = 0;
};

// One training step: `sizes` in use at once, then all given back (in order).
std::vector<int> Step(IdleRegions<FakeRegion>& idle, Maker& maker, const std::vector<size_t>& sizes,
                      std::vector<FakeRegion>* evicted = nullptr) {
  std::vector<FakeRegion> in_use;
  for (size_t bytes : sizes) in_use.push_back(*idle.TakeOrMake(bytes, maker.Of(bytes)));
  std::vector<int> ids;
  for (FakeRegion& region : in_use) {
    ids.push_back(region.id);
    for (FakeRegion& gone : idle.Put(region)) {
      if (evicted != nullptr) evicted->push_back(gone);
    }
  }
  return ids;
}

TEST(IdleRegions, TheSmallestIdleRegionOfAtMostTwiceTheSizeServesTheNextCollective) {
  IdleRegions<FakeRegion> idle(32, kGiB);
  Maker maker;
  Step(idle, maker, {300, 150, 120});
  EXPECT_EQ(idle.TakeOrMake(100, maker.Of(100))->bytes, 120u);
  EXPECT_EQ(idle.TakeOrMake(100, maker.Of(100))->bytes, 150u);
  EXPECT_EQ(idle.TakeOrMake(100, maker.Of(100))->bytes, 100u) << "300 is over twice the size";
  EXPECT_EQ(maker.made(), 4);
}

TEST(IdleRegions, ATensorLargerThanTheMinimumBytesFindsItsRegionAgainInTheNextStep) {
  IdleRegions<FakeRegion> idle(32, kGiB);
  Maker maker;
  const std::vector<int> first = Step(idle, maker, {5 * kGiB / 4});
  EXPECT_EQ(Step(idle, maker, {5 * kGiB / 4}), first) << "not made again";
  EXPECT_EQ(idle.size(), 1u);
}

TEST(IdleRegions, AsManyRegionsStayIdleAsWereInUseAtOnce) {
  // A model of 4 GiB of gradients in 160 buckets of 25 MiB: beyond both minimums.
  IdleRegions<FakeRegion> idle(32, kGiB);
  Maker maker;
  const std::vector<size_t> buckets(160, 25 << 20);
  const std::vector<int> first = Step(idle, maker, buckets);
  for (int step = 0; step < 3; ++step) EXPECT_EQ(Step(idle, maker, buckets), first);
  EXPECT_EQ(maker.made(), 160);
}

TEST(IdleRegions, RegionsOfASizeNoLongerUsedGoLongestIdleFirst) {
  IdleRegions<FakeRegion> idle(2, kGiB);
  Maker maker;
  Step(idle, maker, {100, 100, 100});  // ids 1..3
  std::vector<FakeRegion> evicted;
  Step(idle, maker, {1000, 1000, 1000}, &evicted);  // 100 no longer fits: ids 4..6
  ASSERT_EQ(evicted.size(), 3u) << "three stay idle: as many as were in use at once";
  EXPECT_EQ(evicted[0].id, 1);
  EXPECT_EQ(evicted[1].id, 2);
  EXPECT_EQ(evicted[2].id, 3);
  EXPECT_EQ(idle.size(), 3u);
}

TEST(IdleRegions, IdleBytesStayWithinTheMostInUseAtOnce) {
  IdleRegions<FakeRegion> idle(32, 1000);
  Maker maker;
  Step(idle, maker, {600, 600});  // 1,200 bytes in use at once
  std::vector<FakeRegion> evicted;
  Step(idle, maker, {1300}, &evicted);
  ASSERT_EQ(evicted.size(), 2u) << "1,300 + 1,200 idle would exceed the 1,300 ever in use";
  EXPECT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle.TakeOrMake(1300, maker.Of(1300))->id, 3);
}

TEST(IdleRegions, ARegionThatNeverComesBackNoLongerCountsAsInUse) {
  IdleRegions<FakeRegion> idle(1, 1);
  Maker maker;
  for (int cancelled = 0; cancelled < 5; ++cancelled) {
    absl::StatusOr<FakeRegion> region = idle.TakeOrMake(100, maker.Of(100));
    idle.Forget(region->size());
  }
  std::vector<FakeRegion> evicted;
  Step(idle, maker, {100}, &evicted);
  Step(idle, maker, {200}, &evicted);
  EXPECT_EQ(evicted.size(), 1u) << "one was in use at once: the 100-byte region goes";
  EXPECT_EQ(idle.size(), 1u);
}

TEST(IdleRegions, AFailedMakeCountsNothing) {
  IdleRegions<FakeRegion> idle(1, 1);
  Maker maker;
  for (int refused = 0; refused < 3; ++refused) {
    absl::StatusOr<FakeRegion> region = idle.TakeOrMake(
        100, []() -> absl::StatusOr<FakeRegion> { return absl::ResourceExhaustedError("full"); });
    EXPECT_TRUE(absl::IsResourceExhausted(region.status()));
  }
  std::vector<FakeRegion> evicted;
  Step(idle, maker, {100}, &evicted);
  Step(idle, maker, {200}, &evicted);
  EXPECT_EQ(evicted.size(), 1u);
}

}  // namespace
}  // namespace ringsync::internal
