#include "client/src/shared_memory_region.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SharedMemoryRegionTest, CreatesMapsAndRemoves) {
  std::string path;
  {
    absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(4096 + 3);
    ASSERT_TRUE(region.ok()) << region.status();
    path = region->path();
    EXPECT_THAT(path, StartsWith(absl::StrCat("/dev/shm/ringsync-", getpid(), "-")));
    EXPECT_EQ(region->size(), 4096u + 3);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 4096 + 3);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "only this user may read the tensors";
    // The mapping is the file: what is written through one is seen through the other.
    std::memset(region->data(), 'x', region->size());
    EXPECT_EQ(ReadFile(path), std::string(4096 + 3, 'x'));
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the region must remove its file";
}

TEST(SharedMemoryRegionTest, CreateAtIsExclusiveAndLeavesTheExistingFileAlone) {
  const std::string path = absl::StrCat("/dev/shm/ringsync-test-", getpid(), "-exclusive");
  absl::StatusOr<SharedMemoryRegion> first = SharedMemoryRegion::CreateAt(path, 64);
  ASSERT_TRUE(first.ok()) << first.status();
  std::memset(first->data(), 'a', 64);
  absl::StatusOr<SharedMemoryRegion> second = SharedMemoryRegion::CreateAt(path, 64);
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_EQ(ReadFile(path), std::string(64, 'a')) << "a failed create must not touch the file";
}

TEST(SharedMemoryRegionTest, NamesAreUnique) {
  std::vector<SharedMemoryRegion> regions;
  std::set<std::string> paths;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(1);
    ASSERT_TRUE(region.ok()) << region.status();
    paths.insert(region->path());
    regions.push_back(*std::move(region));
  }
  EXPECT_EQ(paths.size(), 64u);
}

TEST(SharedMemoryRegionTest, MoveTransfersOwnership) {
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(128);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::string path = region->path();
  SharedMemoryRegion moved = *std::move(region);
  EXPECT_TRUE(region->path().empty());
  EXPECT_EQ(region->data(), nullptr);
  EXPECT_EQ(moved.path(), path);
  EXPECT_TRUE(std::filesystem::exists(path));
  {
    SharedMemoryRegion other = std::move(moved);
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SharedMemoryRegionTest, RejectsEmptyRegionsAndMissingDirectories) {
  EXPECT_TRUE(absl::IsInvalidArgument(SharedMemoryRegion::Create(0).status()));
  absl::Status missing = SharedMemoryRegion::Create(8, "/dev/shm/no-such-dir-ringsync").status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("/dev/shm/no-such-dir-ringsync/ringsync-"));
}

}  // namespace
}  // namespace ringsync::internal
