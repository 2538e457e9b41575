#include "daemon/worker/shared_tensor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

class SharedTensorTest : public ::testing::Test {
 protected:
  SharedTensorTest() {
    std::string pattern = "/dev/shm/ringsync-tensor-test-XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  ~SharedTensorTest() override { std::filesystem::remove_all(dir_); }

  // A client's file: `size` bytes of 'a'.
  std::string ClientFile(const std::string& name, size_t size) {
    const std::string path = dir_ + "/" + name;
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    std::string bytes(size, 'a');
    EXPECT_EQ(write(fd, bytes.data(), size), static_cast<ssize_t>(size));
    close(fd);
    return path;
  }

  std::string dir_;
};

TEST_F(SharedTensorTest, MapsTheClientsBytesAndRemovesTheNameSoNothingLeaks) {
  const std::string path = ClientFile("ringsync-1-0-x", 8192);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Map(dir_, path, 4096, 100);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_EQ(tensor->bytes().size(), 100u);
  EXPECT_EQ(static_cast<char>(tensor->bytes()[0]), 'a');
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(SharedTensorTest, AFileTheClientReusesKeepsItsNameAndSeesTheWorkersWrites) {
  const std::string path = ClientFile("ringsync-1-1-x", 4096);
  {
    absl::StatusOr<SharedTensor> tensor =
        SharedTensor::Map(dir_, path, 0, 4096, /*keep_name=*/true);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    std::memset(tensor->bytes().data(), 'b', 4096);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  const int fd = open(path.c_str(), O_RDONLY);
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, 4095), 1);
  close(fd);
  EXPECT_EQ(c, 'b');
}

TEST_F(SharedTensorTest, OnlyRingsyncFilesDirectlyInsideTheDirectoryAreMapped) {
  const std::string other = ClientFile("not-ringsync", 4096);
  EXPECT_THAT(SharedTensor::Map(dir_, other, 0, 16).status().message(),
              HasSubstr("must start with 'ringsync-'"));
  EXPECT_THAT(SharedTensor::Map(dir_, "/etc/passwd", 0, 16).status().message(),
              HasSubstr("not inside"));
  EXPECT_THAT(SharedTensor::Map(dir_, dir_ + "/ringsync-../x", 0, 16).status().message(),
              HasSubstr("directly inside"));
}

TEST_F(SharedTensorTest, ARegionBeyondTheFileIsRefused) {
  const std::string path = ClientFile("ringsync-1-2-x", 4096);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Map(dir_, path, 4000, 100);
  EXPECT_TRUE(absl::IsInvalidArgument(tensor.status()));
  EXPECT_THAT(tensor.status().message(), HasSubstr("exceeds the file's 4096 bytes"));
  EXPECT_TRUE(std::filesystem::exists(path)) << "a refused file is left alone";
}

}  // namespace
}  // namespace ringsync
