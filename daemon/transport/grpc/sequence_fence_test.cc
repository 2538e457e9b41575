#include "daemon/transport/grpc/sequence_fence.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

TEST(SequenceFence, AStreamRepeatsACollectiveOrGoesToTheNextOne) {
  SequenceFence fence;
  EXPECT_TRUE(fence.Admit(1, /*first_on_stream=*/true).ok());
  EXPECT_TRUE(fence.Admit(1, false).ok());  // more frames of collective #1
  EXPECT_TRUE(fence.Admit(2, false).ok());
  EXPECT_EQ(fence.newest(), 2u);
}

TEST(SequenceFence, RefusesAJumpOnAStreamAndKeepsItsPlace) {
  SequenceFence fence;
  ASSERT_TRUE(fence.Admit(1, true).ok());
  const absl::Status jump = fence.Admit(3, false);
  EXPECT_EQ(jump.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(jump.message()), HasSubstr("#3 after collective #1"));
  EXPECT_EQ(fence.newest(), 1u);
  EXPECT_TRUE(fence.Admit(2, false).ok());
}

TEST(SequenceFence, RefusesGoingBack) {
  SequenceFence fence;
  ASSERT_TRUE(fence.Admit(1, true).ok());
  ASSERT_TRUE(fence.Admit(2, false).ok());
  EXPECT_EQ(fence.Admit(1, false).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(fence.Admit(1, true).code(), absl::StatusCode::kPermissionDenied);
}

TEST(SequenceFence, ANewStreamMaySkipCollectivesLostWithTheOldOne) {
  SequenceFence fence;
  ASSERT_TRUE(fence.Admit(5, true).ok());
  EXPECT_TRUE(fence.Admit(5 + SequenceFence::kMaxSkipOnNewStream, true).ok());
  EXPECT_FALSE(fence.Admit(6 + 2 * SequenceFence::kMaxSkipOnNewStream, true).ok());
}

TEST(SequenceFence, ASequenceNearTheTopNeverWrapsTheCounter) {
  SequenceFence fence;
  ASSERT_TRUE(fence.Admit(1, true).ok());
  EXPECT_FALSE(fence.Admit(std::numeric_limits<uint64_t>::max(), true).ok());
  EXPECT_FALSE(fence.Admit(std::numeric_limits<uint64_t>::max(), false).ok());
  EXPECT_EQ(fence.newest(), 1u);
}

}  // namespace
}  // namespace ringsync
