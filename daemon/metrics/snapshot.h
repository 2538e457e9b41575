// The data of one scrape: what every metric family and collector produces, and what
// the text exposition format (text_format.h) writes. Plain values, no synchronization.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringsync::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as the exposition format's TYPE line says.
absl::string_view MetricTypeName(MetricType type);

// Label names and values in the order the family declared the names.
using Labels = std::vector<std::pair<std::string, std::string>>;

// One line of the exposition: NAME SUFFIX {LABELS} VALUE.
struct Sample {
  std::string suffix;  // "" or, for histograms, "_bucket", "_sum", "_count"
  Labels labels;
  double value = 0;
};

struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;
};

// A family of one unlabelled sample (most collector-made metrics).
inline FamilySnapshot SingleSample(std::string name, std::string help, MetricType type,
                                   double value) {
  return FamilySnapshot{std::move(name), std::move(help), type, {Sample{"", {}, value}}};
}

// Prometheus' rules: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__" (reserved). "le" is reserved for
// histogram buckets. InvalidArgument naming the offending name otherwise.
absl::Status ValidateMetricName(absl::string_view name);
absl::Status ValidateLabelName(absl::string_view name);

}  // namespace ringsync::metrics
