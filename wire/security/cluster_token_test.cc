#include "wire/security/cluster_token.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& content) {
  char path[] = "/tmp/ringsync-token-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << content;
  return path;
}

TEST(BearerMatches, AcceptsOnlyTheExactTokenAfterBearer) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cres", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cret!", "s3cret"));
  EXPECT_FALSE(BearerMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("", "s3cret"));
}

TEST(ReadClusterToken, StripsTheTrailingNewline) {
  const std::string path = WriteTemp("  abc123\n");
  EXPECT_EQ(ReadClusterToken(path, "--token_file").value(), "abc123");
  std::remove(path.c_str());
}

TEST(ReadClusterToken, RefusesAnEmptyOrMissingFileNamingTheFlag) {
  const std::string path = WriteTemp("\n");
  EXPECT_THAT(ReadClusterToken(path, "--token_file").status().message(),
              HasSubstr("--token_file=" + path + ": the cluster token file is empty"));
  std::remove(path.c_str());
  EXPECT_THAT(ReadClusterToken("/nonexistent/token", "--token_file").status().message(),
              HasSubstr("cannot read"));
}

TEST(ReadClusterToken, RefusesSeveralLines) {
  const std::string path = WriteTemp("one\ntwo\n");
  EXPECT_THAT(ReadClusterToken(path, "--token_file").status().message(), HasSubstr("one line"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringsync
