#include "daemon/worker/socket_path.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

class SocketPathTest : public ::testing::Test {
 protected:
  SocketPathTest() {
    std::string pattern = "/tmp/ringsync-socket-path-test-XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  ~SocketPathTest() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SocketPathTest, TheDefaultLivesInADirectoryOfThisUser) {
  EXPECT_EQ(DefaultSocketPath("w0"), "/tmp/ringsync-" + std::to_string(getuid()) + "/w0.sock");
}

TEST_F(SocketPathTest, APrivateDirectoryIsCreated0700AndMustStayThat) {
  const std::string dir = dir_ + "/private";
  ASSERT_TRUE(PrepareSocketPath(dir + "/w0.sock", /*private_dir=*/true).ok());
  struct stat info {};
  ASSERT_EQ(stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);

  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);  // opened up, by someone
  absl::Status refused = PrepareSocketPath(dir + "/w0.sock", true);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("with mode 0755, but must be"));
}

TEST_F(SocketPathTest, AnEveryoneWritableDirectoryWithoutTheStickyBitIsRefused) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_THAT(PrepareSocketPath(dir_ + "/w0.sock", false).message(),
              HasSubstr("writable by every user"));
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);  // as /tmp
  EXPECT_TRUE(PrepareSocketPath(dir_ + "/w0.sock", false).ok());
}

TEST_F(SocketPathTest, AStaleSocketIsRemovedButALiveOneOrAnotherFileIsNot) {
  const std::string path = dir_ + "/w0.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  EXPECT_THAT(PrepareSocketPath(path, false).message(), HasSubstr("another process is serving"));
  close(fd);  // the worker that served it is gone; its socket file stays behind
  EXPECT_TRUE(PrepareSocketPath(path, false).ok());
  EXPECT_FALSE(std::filesystem::exists(path));

  close(open(path.c_str(), O_CREAT | O_WRONLY, 0600));
  EXPECT_THAT(PrepareSocketPath(path, false).message(), HasSubstr("is not a socket"));
  EXPECT_TRUE(std::filesystem::exists(path)) << "a file that is not a socket is left alone";
}

}  // namespace
}  // namespace ringsync
