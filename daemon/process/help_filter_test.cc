// --help lists the flags of the files a program names, and no others.
#include "daemon/process/help_filter.h"

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(HelpListingFlagsFrom, ListsFlagsOfFilesWhosePathContainsTheFragment) {
  const absl::FlagsUsageConfig usage = HelpListingFlagsFrom("daemon/");
  EXPECT_TRUE(usage.contains_help_flags("daemon/worker/worker_main.cc"));
  EXPECT_TRUE(usage.contains_help_flags("/src/ringsync/daemon/process/port_file.cc"));
  EXPECT_FALSE(usage.contains_help_flags("/usr/include/absl/flags/internal/usage.cc"));
  EXPECT_FALSE(usage.contains_help_flags("tools/ringsyncctl/ringsyncctl_main.cc"));
}

TEST(HelpListingFlagsFrom, HelpshortListsTheSameFlags) {
  const absl::FlagsUsageConfig usage = HelpListingFlagsFrom("bench/ringsync_bench.cc");
  EXPECT_TRUE(usage.contains_helpshort_flags("bench/ringsync_bench.cc"));
  EXPECT_FALSE(usage.contains_helpshort_flags("bench/reducer_bench.cc"));
}

TEST(HelpListingFlagsFrom, LeavesTheOtherSettingsToAbseil) {
  const absl::FlagsUsageConfig usage = HelpListingFlagsFrom("daemon/");
  EXPECT_FALSE(usage.contains_helppackage_flags);
  EXPECT_FALSE(usage.version_string);
  EXPECT_FALSE(usage.normalize_filename);
}

}  // namespace
}  // namespace ringsync
