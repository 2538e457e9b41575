// ringsync_build_info{version="0.1.0"} 1: which release a daemon runs, the usual
// Prometheus "info" idiom (join on it to label other series with the version).
// prometheus-cpp has no such metric of its own; this is a gauge registered with it.
#pragma once

#include "absl/strings/string_view.h"
#include "prometheus/registry.h"

namespace ringsync::metrics {

// The project version this binary was built from (CMake's PROJECT_VERSION).
absl::string_view RingsyncVersion();

// Registers the gauge ringsync_build_info{version} = 1.
void AddBuildInfo(prometheus::Registry& registry);

}  // namespace ringsync::metrics
