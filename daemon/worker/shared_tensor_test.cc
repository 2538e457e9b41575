#include "daemon/worker/shared_tensor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

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
    rules_ = {dir_, getuid(), /*owner_pid=*/1};
  }
  ~SharedTensorTest() override { std::filesystem::remove_all(dir_); }

  // A client's file: `size` bytes of 'a', every page written (allocated).
  std::string ClientFile(const std::string& name, size_t size) {
    const std::string path = dir_ + "/" + name;
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    std::string bytes(size, 'a');
    EXPECT_EQ(write(fd, bytes.data(), size), static_cast<ssize_t>(size));
    close(fd);
    return path;
  }

  std::string dir_;
  SharedFileRules rules_;
};

TEST_F(SharedTensorTest, ReadsTheClientsBytesAndRemovesTheNameSoNothingLeaks) {
  const std::string path = ClientFile("ringsync-1-0-x", 8192);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 4096, 100);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_EQ(tensor->size(), 100u);
  std::vector<std::byte> bytes(100);
  ASSERT_TRUE(tensor->ReadInto(absl::MakeSpan(bytes)).ok());
  EXPECT_EQ(static_cast<char>(bytes[0]), 'a');
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(SharedTensorTest, AFileTheClientReusesKeepsItsNameAndSeesTheWorkersWrites) {
  const std::string path = ClientFile("ringsync-1-1-x", 4096);
  {
    absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 0, 4096, true);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    const std::vector<std::byte> result(4096, std::byte{'b'});
    ASSERT_TRUE(tensor->WriteFrom(result).ok());
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  const int fd = open(path.c_str(), O_RDONLY);
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, 4095), 1);
  close(fd);
  EXPECT_EQ(c, 'b');
}

TEST_F(SharedTensorTest, OnlyTheClientsOwnRingsyncFilesDirectlyInsideTheDirectoryAreOpened) {
  const std::string other = ClientFile("not-ringsync", 4096);
  EXPECT_THAT(SharedTensor::Open(rules_, other, 0, 16).status().message(),
              HasSubstr("must start with 'ringsync-1-'"));
  const std::string another_pids = ClientFile("ringsync-2-0-x", 4096);
  EXPECT_THAT(SharedTensor::Open(rules_, another_pids, 0, 16).status().message(),
              HasSubstr("the attached client's own files"));
  EXPECT_TRUE(std::filesystem::exists(another_pids)) << "another client's file is left alone";
  EXPECT_THAT(SharedTensor::Open(rules_, "/etc/passwd", 0, 16).status().message(),
              HasSubstr("not inside"));
  EXPECT_THAT(SharedTensor::Open(rules_, dir_ + "/ringsync-1-../x", 0, 16).status().message(),
              HasSubstr("directly inside"));
}

TEST_F(SharedTensorTest, AFileOfAnotherUserIsRefusedAndLeftAlone) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  const std::string path = ClientFile("ringsync-1-3-x", 4096);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 0, 4096);
  EXPECT_TRUE(absl::IsPermissionDenied(tensor.status())) << tensor.status();
  EXPECT_THAT(tensor.status().message(), HasSubstr("belongs to uid 65534"));
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST_F(SharedTensorTest, ARegionBeyondTheFileIsRefused) {
  const std::string path = ClientFile("ringsync-1-2-x", 4096);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 4000, 100);
  EXPECT_TRUE(absl::IsInvalidArgument(tensor.status()));
  EXPECT_THAT(tensor.status().message(), HasSubstr("exceeds the file's 4096 bytes"));
  EXPECT_TRUE(std::filesystem::exists(path)) << "a refused file is left alone";
}

TEST_F(SharedTensorTest, ASparseFileIsRefused) {
  const std::string path = dir_ + "/ringsync-1-4-x";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);  // a hole: nothing allocated
  close(fd);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 0, 1 << 20);
  EXPECT_TRUE(absl::IsInvalidArgument(tensor.status()));
  EXPECT_THAT(tensor.status().message(), HasSubstr("sparse"));
}

TEST_F(SharedTensorTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string path = dir_ + "/ringsync-1-5-x";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EXPECT_THAT(SharedTensor::Open(rules_, path, 0, 16).status().message(),
              HasSubstr("not a regular file"));
}

TEST_F(SharedTensorTest, AFileTruncatedAfterOpeningIsAnErrorNotACrash) {
  const std::string path = ClientFile("ringsync-1-6-x", 8192);
  absl::StatusOr<SharedTensor> tensor = SharedTensor::Open(rules_, path, 0, 8192, true);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_EQ(truncate(path.c_str(), 100), 0);  // the client shrinks it under the worker
  std::vector<std::byte> bytes(8192);
  absl::Status read = tensor->ReadInto(absl::MakeSpan(bytes));
  EXPECT_TRUE(absl::IsDataLoss(read)) << read;
  EXPECT_THAT(read.message(), HasSubstr("was truncated to 100 bytes"));
  absl::Status written = tensor->WriteFrom(bytes);
  EXPECT_TRUE(absl::IsDataLoss(written)) << written;
  EXPECT_EQ(std::filesystem::file_size(path), 100u) << "the write did not grow the file back";
}

}  // namespace
}  // namespace ringsync
