#include "daemon/process/help_filter.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace ringsync {

absl::FlagsUsageConfig HelpListingFlagsFrom(std::string path_fragment) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [path_fragment = std::move(path_fragment)](absl::string_view file) {
    return absl::StrContains(file, path_fragment);
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  return usage;
}

}  // namespace ringsync
