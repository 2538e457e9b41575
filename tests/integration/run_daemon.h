// Runs `ringsyncd ROLE FLAGS...` (with --insecure) until it exits, for tests of what the
// daemon says about its flags at start-up.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/read_file.h"
#include "gtest/gtest.h"
#include "tools/cluster/child_process.h"

namespace ringsync::testing {

// The daemon's exit code (-1 if it could not be run or did not exit within 20 s) and
// its output.
inline std::pair<int, std::string> RunDaemon(const std::string& role,
                                             std::vector<std::string> flags) {
  // One daemon at a time per test process: the pid names its log.
  const std::string log = absl::StrCat(::testing::TempDir(), "/run_daemon_", ::getpid(), ".log");
  std::filesystem::remove(log);
  std::vector<std::string> argv = {RINGSYNCD_PATH, role, "--insecure"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<ChildProcess> process = ChildProcess::Start(argv, log);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {-1, ""};
  absl::StatusOr<int> exit_code = process->Wait(absl::Seconds(20));
  EXPECT_TRUE(exit_code.ok()) << exit_code.status();
  std::string output = ReadFile(log);
  std::filesystem::remove(log);
  return {exit_code.ok() ? *exit_code : -1, output};
}

}  // namespace ringsync::testing
