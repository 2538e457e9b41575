// Specification of the port file: the whole address line or no file, and errors that
// name the path.
#include "daemon/process/port_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/testing/read_file.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : ::testing::TempDir();
}

TEST(WritePortFile, WritesTheAddressAndANewlineReplacingAnOldFile) {
  const std::string path = absl::StrCat(TempDir(), "/coord_", getpid(), ".port");
  ASSERT_TRUE(WritePortFile(path, "127.0.0.1:1234").ok());
  EXPECT_EQ(ReadFile(path), "127.0.0.1:1234\n");
  ASSERT_TRUE(WritePortFile(path, "127.0.0.1:99").ok());
  EXPECT_EQ(ReadFile(path), "127.0.0.1:99\n");
  struct stat st;
  EXPECT_NE(stat(absl::StrCat(path, ".tmp.", getpid()).c_str(), &st), 0)
      << "no temporary file is left behind";
  unlink(path.c_str());
}

TEST(WritePortFile, AMissingDirectoryIsAnErrorThatNamesThePath) {
  const absl::Status status = WritePortFile("/nonexistent-dir/x.port", "127.0.0.1:1");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent-dir/x.port"));
}

}  // namespace
}  // namespace ringsync
