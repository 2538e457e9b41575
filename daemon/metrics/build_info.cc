#include "daemon/metrics/build_info.h"

#include <string>

#ifndef RINGSYNC_VERSION
#define RINGSYNC_VERSION "unknown"
#endif

namespace ringsync::metrics {

absl::string_view RingsyncVersion() { return RINGSYNC_VERSION; }

void AddBuildInfo(Registry& registry) {
  registry
      .AddGauge("ringsync_build_info", "Always 1; the label names the ringsync release of this daemon.",
                {"version"})
      .WithLabels({std::string(RingsyncVersion())})
      .Set(1);
}

}  // namespace ringsync::metrics
