// Specification of --log_level's check: spdlog's level names, nothing else.
#include "daemon/logging/log_flags.h"

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

TEST(ValidateLogFlags, AcceptsSpdlogLevelNamesAndRefusesOthers) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    absl::SetFlag(&FLAGS_log_level, level);
    EXPECT_TRUE(ValidateLogFlags().ok()) << level;
  }
  absl::SetFlag(&FLAGS_log_level, "verbose");
  const absl::Status status = ValidateLogFlags();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--log_level='verbose'"));
  absl::SetFlag(&FLAGS_log_level, "info");
}

}  // namespace
}  // namespace ringsync
