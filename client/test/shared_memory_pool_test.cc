#include "client/src/shared_memory_pool.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class SharedMemoryPoolTest : public ::testing::Test {
 protected:
  SharedMemoryPoolTest() {
    std::string pattern = "/dev/shm/ringsync-pool-test-XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  ~SharedMemoryPoolTest() override { std::filesystem::remove_all(dir_); }
  size_t FilesInDir() const {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) n += entry.is_regular_file();
    return n;
  }

  std::string dir_;
};

TEST_F(SharedMemoryPoolTest, AReleasedRegionServesTheNextCollectiveOfTheSameSize) {
  SharedMemoryPool pool(dir_);
  absl::StatusOr<SharedMemoryRegion> first = pool.Acquire(kMiB);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string path = first->path();
  pool.Release(*std::move(first));
  EXPECT_EQ(pool.idle_regions(), 1u);
  EXPECT_TRUE(std::filesystem::exists(path)) << "kept for reuse";

  absl::StatusOr<SharedMemoryRegion> second = pool.Acquire(kMiB - 100);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->path(), path);
  EXPECT_EQ(pool.idle_regions(), 0u);
}

TEST_F(SharedMemoryPoolTest, RegionsInUseAreNeverHandedOutTwice) {
  SharedMemoryPool pool(dir_);
  absl::StatusOr<SharedMemoryRegion> a = pool.Acquire(kMiB);
  absl::StatusOr<SharedMemoryRegion> b = pool.Acquire(kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
  EXPECT_NE(a->data(), b->data());
}

TEST_F(SharedMemoryPoolTest, ARegionMoreThanTwiceTheSizeIsNotUsedForASmallTensor) {
  SharedMemoryPool pool(dir_);
  absl::StatusOr<SharedMemoryRegion> big = pool.Acquire(8 * kMiB);
  ASSERT_TRUE(big.ok());
  const std::string big_path = big->path();
  pool.Release(*std::move(big));
  absl::StatusOr<SharedMemoryRegion> small = pool.Acquire(kMiB);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small->path(), big_path);
  EXPECT_EQ(small->size(), kMiB);
  EXPECT_EQ(pool.idle_regions(), 1u);
}

TEST_F(SharedMemoryPoolTest, TheBestFittingIdleRegionIsChosen) {
  SharedMemoryPool pool(dir_);
  absl::StatusOr<SharedMemoryRegion> larger = pool.Acquire(3 * kMiB / 2);
  absl::StatusOr<SharedMemoryRegion> exact = pool.Acquire(kMiB);
  ASSERT_TRUE(larger.ok() && exact.ok());
  const std::string exact_path = exact->path();
  pool.Release(*std::move(larger));
  pool.Release(*std::move(exact));
  EXPECT_EQ(pool.Acquire(kMiB)->path(), exact_path);
}

TEST_F(SharedMemoryPoolTest, RegionsOfASizeNoLongerUsedAreRemovedLongestIdleFirst) {
  SharedMemoryPool pool(dir_);
  std::string oldest;
  for (size_t bytes : {size_t{4096}, 16 * size_t{4096}}) {  // the second size needs new files
    std::vector<SharedMemoryRegion> in_use;
    for (size_t i = 0; i < SharedMemoryPool::kMinIdleRegions; ++i) {
      in_use.push_back(*pool.Acquire(bytes));
    }
    if (oldest.empty()) oldest = in_use[0].path();
    for (SharedMemoryRegion& region : in_use) pool.Release(std::move(region));
  }
  EXPECT_EQ(pool.idle_regions(), SharedMemoryPool::kMinIdleRegions);
  EXPECT_EQ(FilesInDir(), SharedMemoryPool::kMinIdleRegions);
  EXPECT_FALSE(std::filesystem::exists(oldest));
}

TEST_F(SharedMemoryPoolTest, ADiscardedRegionIsRemovedAndNeverServesAgain) {
  SharedMemoryPool pool(dir_);
  absl::StatusOr<SharedMemoryRegion> cancelled = pool.Acquire(kMiB);
  ASSERT_TRUE(cancelled.ok());
  const std::string path = cancelled->path();
  pool.Discard(*std::move(cancelled));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(pool.idle_regions(), 0u);
  EXPECT_NE(pool.Acquire(kMiB)->path(), path);
}

TEST_F(SharedMemoryPoolTest, EveryFileGoesWithThePool) {
  {
    SharedMemoryPool pool(dir_);
    pool.Release(*pool.Acquire(kMiB));
    absl::StatusOr<SharedMemoryRegion> in_use = pool.Acquire(kMiB);
    ASSERT_TRUE(in_use.ok());
    EXPECT_EQ(FilesInDir(), 1u);
  }
  EXPECT_EQ(FilesInDir(), 0u);
}

TEST_F(SharedMemoryPoolTest, AMissingDirectoryIsAnErrorNotACrash) {
  SharedMemoryPool pool(dir_ + "/missing");
  absl::StatusOr<SharedMemoryRegion> region = pool.Acquire(kMiB);
  EXPECT_TRUE(absl::IsNotFound(region.status())) << region.status();
}

}  // namespace
}  // namespace ringsync::internal
