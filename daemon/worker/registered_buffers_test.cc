#include "daemon/worker/registered_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

// A memfd as the SDK makes one (client/src/registered_memory.cc), with each step optional
// so that tests can leave one out.
struct Memfd {
  explicit Memfd(size_t size, bool allocate = true, bool seal = true) {
    fd = ::memfd_create("registered-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    if (allocate) {
      EXPECT_EQ(::posix_fallocate(fd, 0, static_cast<off_t>(size)), 0);
    }
    if (seal) {
      EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
  }
  ~Memfd() { ::close(fd); }
  int fd = -1;
};

RegisteredBuffers Table(size_t max_buffers = 4, uint64_t max_bytes = 1 << 20) {
  return RegisteredBuffers(RegisteredBufferLimits{max_buffers, max_bytes});
}

TEST(RegisteredBuffers, ASealedAllocatedMemfdIsMappedAndSharedWithItsOwner) {
  Memfd memfd(8192);
  RegisteredBuffers table = Table();
  absl::StatusOr<uint64_t> id = table.Register(getpid(), getuid(), memfd.fd, 8192);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_NE(*id, 0u);
  absl::StatusOr<RegisteredBuffers::Slice> slice = table.Find(*id, 4096, 16);
  ASSERT_TRUE(slice.ok()) << slice.status();
  std::memcpy(slice->bytes.data(), "written by worker", 16);
  char seen[16];
  ASSERT_EQ(::pread(memfd.fd, seen, 16, 4096), 16);
  EXPECT_EQ(std::memcmp(seen, "written by worker", 16), 0);
}

TEST(RegisteredBuffers, EveryRangeIsCheckedAgainstTheMapping) {
  Memfd memfd(4096);
  RegisteredBuffers table = Table();
  const uint64_t id = table.Register(getpid(), getuid(), memfd.fd, 4096).value();
  EXPECT_TRUE(table.Find(id, 0, 4096).ok());
  EXPECT_TRUE(table.Find(id, 4096, 0).ok());
  EXPECT_THAT(table.Find(id, 1, 4096).status().message(), HasSubstr("exceeds its 4096 bytes"));
  EXPECT_FALSE(table.Find(id, 4097, 0).ok());
  EXPECT_FALSE(table.Find(id, ~uint64_t{0}, 2).ok());  // offset + size overflows
  EXPECT_FALSE(table.Find(id, 2, ~uint64_t{0}).ok());
  EXPECT_THAT(table.Find(id + 1, 0, 1).status().message(), HasSubstr("not registered"));
}

TEST(RegisteredBuffers, MemoryWhoseSizeCouldChangeIsRefused) {
  Memfd unsealed(4096, /*allocate=*/true, /*seal=*/false);
  RegisteredBuffers table = Table();
  absl::StatusOr<uint64_t> id = table.Register(getpid(), getuid(), unsealed.fd, 4096);
  EXPECT_TRUE(absl::IsInvalidArgument(id.status())) << id.status();
  EXPECT_THAT(id.status().message(), HasSubstr("sealed"));
}

TEST(RegisteredBuffers, SparseMemoryIsRefused) {
  Memfd sparse(1 << 16, /*allocate=*/false);
  RegisteredBuffers table = Table();
  absl::StatusOr<uint64_t> id = table.Register(getpid(), getuid(), sparse.fd, 1 << 16);
  EXPECT_THAT(id.status().message(), HasSubstr("allocated"));
}

TEST(RegisteredBuffers, TheSizeMustBeTheMemfdsOwn) {
  Memfd memfd(4096);
  RegisteredBuffers table = Table();
  EXPECT_THAT(table.Register(getpid(), getuid(), memfd.fd, 8192).status().message(),
              HasSubstr("holds 4096 bytes"));
  EXPECT_FALSE(table.Register(getpid(), getuid(), memfd.fd, 2048).ok());
}

TEST(RegisteredBuffers, AFileOfAnotherUserIsRefused) {
  Memfd memfd(4096);
  RegisteredBuffers table = Table();
  absl::StatusOr<uint64_t> id = table.Register(getpid(), getuid() + 1, memfd.fd, 4096);
  EXPECT_TRUE(absl::IsPermissionDenied(id.status())) << id.status();
}

TEST(RegisteredBuffers, ABadDescriptorOrAnInvisiblePidIsRefused) {
  RegisteredBuffers table = Table();
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Register(0, getuid(), 3, 4096).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(table.Register(getpid(), getuid(), -1, 4096).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      table.Register(getpid(), getuid(), int64_t{1} << 40, 4096).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Register(getpid(), getuid(), 999999, 4096).status()));
  const int pipe_fds[2] = {-1, -1};
  ASSERT_EQ(::pipe(const_cast<int*>(pipe_fds)), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(table.Register(getpid(), getuid(), pipe_fds[0], 4096).status()));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(RegisteredBuffers, AHandedOverDescriptorNeedsNoPidAndPassesTheSameChecksAndBounds) {
  RegisteredBuffers table = Table(/*max_buffers=*/1);
  Memfd sealed(8192), unsealed(8192, true, false);
  // A client in another pid namespace: the worker sees no pid, only the descriptor.
  const UniqueFd handed(::dup(sealed.fd));
  absl::StatusOr<uint64_t> id = table.RegisterDescriptor(getuid(), handed, 8192);
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<RegisteredBuffers::Slice> slice = table.Find(*id, 0, 8);
  ASSERT_TRUE(slice.ok());
  std::memcpy(slice->bytes.data(), "shared!", 8);
  char seen[8];
  ASSERT_EQ(::pread(sealed.fd, seen, 8, 0), 8);
  EXPECT_STREQ(seen, "shared!");

  ASSERT_TRUE(table.Release(*id).ok());
  const UniqueFd not_sealed(::dup(unsealed.fd));
  EXPECT_THAT(std::string(table.RegisterDescriptor(getuid(), not_sealed, 8192).status().message()),
              HasSubstr("(a descriptor the client handed over): not a memfd sealed"));
  EXPECT_TRUE(absl::IsInvalidArgument(table.RegisterDescriptor(getuid(), handed, 4096).status()))
      << "the size must be the memfd's own";
  EXPECT_TRUE(absl::IsPermissionDenied(
      table.RegisterDescriptor(getuid() + 1, handed, 8192).status())) << "another user's";
  ASSERT_TRUE(table.RegisterDescriptor(getuid(), handed, 8192).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(table.RegisterDescriptor(getuid(), handed, 8192).status()));
}

TEST(RegisteredBuffers, CountAndSizeAreBounded) {
  RegisteredBuffers table = Table(/*max_buffers=*/2, /*max_bytes=*/8192);
  Memfd a(4096), b(4096), c(4096), big(16384);
  EXPECT_TRUE(absl::IsResourceExhausted(table.Register(getpid(), getuid(), big.fd, 16384).status()));
  EXPECT_TRUE(absl::IsResourceExhausted(table.Register(getpid(), getuid(), a.fd, 0).status()));
  const uint64_t first = table.Register(getpid(), getuid(), a.fd, 4096).value();
  ASSERT_TRUE(table.Register(getpid(), getuid(), b.fd, 4096).ok());
  absl::StatusOr<uint64_t> third = table.Register(getpid(), getuid(), c.fd, 4096);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("--max_registered_buffers"));
  ASSERT_TRUE(table.Release(first).ok());
  EXPECT_TRUE(table.Register(getpid(), getuid(), c.fd, 4096).ok());
  EXPECT_TRUE(absl::IsNotFound(table.Release(first)));
  table.Clear();
  EXPECT_EQ(table.size(), 0u);
}

TEST(RegisteredBuffers, ARunningCollectiveKeepsItsMappingAfterRelease) {
  Memfd memfd(4096);
  RegisteredBuffers table = Table();
  const uint64_t id = table.Register(getpid(), getuid(), memfd.fd, 4096).value();
  RegisteredBuffers::Slice slice = table.Find(id, 0, 4096).value();
  table.Clear();
  std::memset(slice.bytes.data(), 7, slice.bytes.size());  // still mapped: no fault
  char seen = 0;
  ASSERT_EQ(::pread(memfd.fd, &seen, 1, 100), 1);
  EXPECT_EQ(seen, 7);
}

}  // namespace
}  // namespace ringsync
