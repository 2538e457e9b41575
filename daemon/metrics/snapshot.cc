#include "daemon/metrics/snapshot.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringsync::metrics {
namespace {

bool IsNameStart(char c, bool colon_allowed) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         (colon_allowed && c == ':');
}

bool IsNameChar(char c, bool colon_allowed) {
  return IsNameStart(c, colon_allowed) || absl::ascii_isdigit(static_cast<unsigned char>(c));
}

bool MatchesName(absl::string_view name, bool colon_allowed) {
  if (name.empty() || !IsNameStart(name[0], colon_allowed)) return false;
  for (char c : name) {
    if (!IsNameChar(c, colon_allowed)) return false;
  }
  return true;
}

}  // namespace

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

absl::Status ValidateMetricName(absl::string_view name) {
  if (MatchesName(name, /*colon_allowed=*/true)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not a metric name: use [a-zA-Z_:][a-zA-Z0-9_:]*"));
}

absl::Status ValidateLabelName(absl::string_view name) {
  if (!MatchesName(name, /*colon_allowed=*/false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a label name: use [a-zA-Z_][a-zA-Z0-9_]*"));
  }
  if (absl::StartsWith(name, "__")) {
    return absl::InvalidArgumentError(
        absl::StrCat("label name '", name, "' starts with '__', which Prometheus reserves"));
  }
  if (name == "le") {
    return absl::InvalidArgumentError("label name 'le' is reserved for histogram buckets");
  }
  return absl::OkStatus();
}

}  // namespace ringsync::metrics
