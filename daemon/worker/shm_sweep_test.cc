#include "daemon/worker/shm_sweep.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::IsEmpty;

class ShmSweepTest : public ::testing::Test {
 protected:
  ShmSweepTest()
      : dir_(absl::StrCat(::testing::TempDir(), "/shm_sweep_", ::getpid(), "_",
                          ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ShmSweepTest() override { std::filesystem::remove_all(dir_); }

  std::string Make(const std::string& name) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "tensor";
    return path;
  }
  bool Exists(const std::string& path) { return std::filesystem::exists(path); }

  const std::string dir_;
  // Pid 4242 is dead, every other pid alive: the test decides, not the machine.
  std::function<bool(pid_t)> alive_ = [](pid_t pid) { return pid != 4242; };
};

TEST_F(ShmSweepTest, RemovesTheFilesOfADeadClientOfThisUser) {
  const std::string dead = Make("ringsync-4242-1-0000abcd");
  const std::string dead_too = Make("ringsync-4242-17-deadBEEF");
  EXPECT_EQ(SweepDeadClientFiles(dir_, ::geteuid(), alive_).size(), 2u);
  EXPECT_FALSE(Exists(dead));
  EXPECT_FALSE(Exists(dead_too));
}

TEST_F(ShmSweepTest, KeepsTheFilesOfALiveClient) {
  const std::string live = Make("ringsync-4243-1-0000abcd");
  EXPECT_THAT(SweepDeadClientFiles(dir_, ::geteuid(), alive_), IsEmpty());
  EXPECT_TRUE(Exists(live));
}

TEST_F(ShmSweepTest, NeverTouchesAnotherUsersFiles) {
  const std::string dead = Make("ringsync-4242-1-0000abcd");
  // As a worker of another user would see this user's file.
  EXPECT_THAT(SweepDeadClientFiles(dir_, ::geteuid() + 1, alive_), IsEmpty());
  EXPECT_TRUE(Exists(dead));
}

TEST_F(ShmSweepTest, KeepsWhatIsNotExactlyAnSdkFileName) {
  const std::vector<std::string> kept = {
      Make("ringsync-4242-1-0000abc"),     // 7 hex digits
      Make("ringsync-4242-1-0000abcg"),    // not hex
      Make("ringsync-4242-0000abcd"),      // no counter
      Make("ringsync-4242-1-0000abcd-x"),  // a suffix
      Make("ringsync-0-1-0000abcd"),       // no pid
      Make("other-4242-1-0000abcd"),
  };
  EXPECT_THAT(SweepDeadClientFiles(dir_, ::geteuid(), alive_), IsEmpty());
  for (const std::string& path : kept) EXPECT_TRUE(Exists(path)) << path;
}

TEST_F(ShmSweepTest, KeepsALinkNamedLikeADeadClientsFile) {
  const std::string target = Make("precious");
  const std::string link = dir_ + "/ringsync-4242-1-0000abcd";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(SweepDeadClientFiles(dir_, ::geteuid(), alive_), IsEmpty());
  EXPECT_TRUE(Exists(target));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
}

TEST_F(ShmSweepTest, AMissingDirectorySweepsNothing) {
  EXPECT_THAT(SweepDeadClientFiles(dir_ + "/absent", ::geteuid(), alive_), IsEmpty());
}

TEST(ProcessExists, KnowsThisProcessAndAReapedChild) {
  EXPECT_TRUE(ProcessExists(::getpid()));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(ProcessExists(child));
}

}  // namespace
}  // namespace ringsync
