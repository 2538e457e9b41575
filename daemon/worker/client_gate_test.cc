#include "daemon/worker/client_gate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

TEST(ClientGate, OnlyTheAttachedClientsTokenPasses) {
  ClientGate gate;
  EXPECT_THAT(gate.Check("anything").status().message(), HasSubstr("no training process"));
  const std::string token = *gate.Open(PeerCredentials{.pid = 42, .uid = 1000, .gid = 1000});
  EXPECT_EQ(token.size(), 64u) << "256 bits, hex";

  absl::StatusOr<AttachedClient> attached = gate.Check(token);
  ASSERT_TRUE(attached.ok()) << attached.status();
  ASSERT_TRUE(attached->local.has_value());
  EXPECT_EQ(attached->local->pid, 42);
  EXPECT_TRUE(absl::IsPermissionDenied(gate.Check("").status()));
  std::string guessed = token;
  guessed.back() = guessed.back() == '0' ? '1' : '0';
  EXPECT_TRUE(absl::IsPermissionDenied(gate.Check(guessed).status()));
}

TEST(ClientGate, EachAttachmentHasItsOwnTokenAndAStaleOneClosesNothing) {
  ClientGate gate;
  const std::string first = *gate.Open(std::nullopt);
  gate.Close(first);
  const std::string second = *gate.Open(std::nullopt);
  EXPECT_NE(first, second);
  EXPECT_FALSE(gate.Check(first).ok()) << "the departed client's token is void";
  gate.Close(first);
  EXPECT_TRUE(gate.Check(second).ok()) << "closing with a stale token detaches no one";
}

TEST(SameSecret, ComparesWholeStrings) {
  EXPECT_TRUE(SameSecret("abc", "abc"));
  EXPECT_FALSE(SameSecret("abc", "abd"));
  EXPECT_FALSE(SameSecret("abc", "ab"));
  EXPECT_TRUE(SameSecret("", ""));
}

}  // namespace
}  // namespace ringsync
