// The metric families a prometheus::Collectable builds at scrape time, for values that
// live elsewhere (/proc, the coordinator's membership, the ring's state) and are read
// when /metrics is asked for rather than updated as they change:
//
//   std::vector<prometheus::MetricFamily> Collect() const override {
//     return {SingleSample("ringsync_ring_rank", "This worker's rank.",
//                          prometheus::MetricType::Gauge, ring_.Status().rank)};
//   }
//
// prometheus::ClientMetric keeps one value field per metric type; these helpers fill the
// one that the family's type makes the text serializer read.
//
// HELP text is written as given (prometheus-cpp 1.0.1 does not escape it): it must not
// hold a backslash or a newline. Label values are escaped by the serializer.
#pragma once

#include <string>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace ringsync::metrics {

using SampleLabels = std::vector<prometheus::ClientMetric::Label>;

// One sample of a counter or gauge family.
// REQUIRES: type is prometheus::MetricType::Counter or Gauge.
prometheus::ClientMetric Sample(prometheus::MetricType type, double value,
                                SampleLabels labels = {});

// A counter or gauge family of one unlabelled sample.
// REQUIRES: type is prometheus::MetricType::Counter or Gauge.
prometheus::MetricFamily SingleSample(std::string name, std::string help,
                                      prometheus::MetricType type, double value);

}  // namespace ringsync::metrics
