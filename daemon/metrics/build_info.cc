#include "daemon/metrics/build_info.h"

#include <string>

#include "prometheus/gauge.h"

#ifndef RINGSYNC_VERSION
#define RINGSYNC_VERSION "unknown"
#endif

namespace ringsync::metrics {

absl::string_view RingsyncVersion() { return RINGSYNC_VERSION; }

void AddBuildInfo(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("ringsync_build_info")
      .Help("Always 1; the label names the ringsync release of this daemon.")
      .Register(registry)
      .Add({{"version", std::string(RingsyncVersion())}})
      .Set(1);
}

}  // namespace ringsync::metrics
