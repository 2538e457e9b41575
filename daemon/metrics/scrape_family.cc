#include "daemon/metrics/scrape_family.h"

#include <utility>

namespace ringsync::metrics {

prometheus::ClientMetric Sample(prometheus::MetricType type, double value, SampleLabels labels) {
  prometheus::ClientMetric sample;
  sample.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    sample.counter.value = value;
  } else {
    sample.gauge.value = value;
  }
  return sample;
}

prometheus::MetricFamily SingleSample(std::string name, std::string help,
                                      prometheus::MetricType type, double value) {
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {Sample(type, value)}};
}

}  // namespace ringsync::metrics
