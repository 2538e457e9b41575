// ringsync_build_info{version="0.1.0"} 1: which release a daemon runs, the usual
// Prometheus "info" idiom (join on it to label other series with the version).
#pragma once

#include "absl/strings/string_view.h"
#include "daemon/metrics/registry.h"

namespace ringsync::metrics {

// The project version this binary was built from (CMake's PROJECT_VERSION).
absl::string_view RingsyncVersion();

// Adds the gauge ringsync_build_info{version} = 1.
void AddBuildInfo(Registry& registry);

}  // namespace ringsync::metrics
