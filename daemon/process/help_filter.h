// Which flags a ringsync program's --help lists: its own, not the dozens that gRPC and
// Abseil define. Abseil's default picks flags by matching the program's name against
// source file names, which misses programs named with dashes (ringsync-bench) and
// programs whose flags live in several files (ringsyncd).
#pragma once

#include <string>

#include "absl/flags/usage_config.h"

namespace ringsync {

// A usage config under which --help and --helpshort list only the flags defined in
// source files whose path contains `path_fragment`, e.g. "daemon/" or
// "bench/ringsync_bench.cc". Install it with absl::SetFlagsUsageConfig before
// absl::ParseCommandLine.
absl::FlagsUsageConfig HelpListingFlagsFrom(std::string path_fragment);

}  // namespace ringsync
