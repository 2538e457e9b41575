// How a started program is stopped: SIGTERM first, its exit code returned; and where it
// runs under a launcher that ignores SIGTERM and waits for it (unshare --fork), Stop
// returns only once the program itself has finished shutting down.
#include "tools/cluster/child_process.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(ChildProcess, StopEndsAProgramWithSigtermAndReturnsItsExitCode) {
  absl::StatusOr<ChildProcess> sleeper = ChildProcess::Start({"/bin/sleep", "100"}, "");
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  EXPECT_TRUE(sleeper->running());
  EXPECT_EQ(sleeper->Stop(), 128 + SIGTERM);
  EXPECT_FALSE(sleeper->running());
}

TEST(ChildProcess, StopWaitsForAProgramUnderALauncherThatIgnoresSigterm) {
  const std::string marker =
      ::testing::TempDir() + "/ringsync-child-process-" + std::to_string(::getpid());
  std::filesystem::remove(marker);
  // The program takes half a second to shut down, then leaves the marker behind. (Should
  // unshare be killed first, --kill-child ends the program too: no stray process.)
  absl::StatusOr<ChildProcess> launched = ChildProcess::Start(
      {"/usr/bin/unshare", "--fork", "--kill-child=SIGKILL", "/bin/sh", "-c",
       "trap 'sleep 0.5; echo stopped > \"$0\"; exit 0' TERM; while :; do sleep 0.05; done",
       marker},
      "");
  ASSERT_TRUE(launched.ok()) << launched.status();
  ::usleep(200'000);  // the trap is set
  EXPECT_EQ(launched->Stop(absl::Seconds(5)), 0);  // the program's own exit code
  EXPECT_TRUE(std::filesystem::exists(marker)) << "Stop returned before the program finished";
  std::filesystem::remove(marker);
}

}  // namespace
}  // namespace ringsync
