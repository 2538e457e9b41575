// Histogram: counts observations (e.g. collective durations in seconds) in buckets with
// fixed upper bounds, plus their sum and count, as Prometheus' histogram type: bucket
// `le=B` counts observations <= B, cumulatively, and `le="+Inf"` counts all of them.
//
// Thread-safety: all methods are safe from any thread. Observe is a few atomic adds and
// never blocks; a concurrent snapshot may see an observation in the buckets before the
// sum, never the other way round in the count (the count is the +Inf bucket).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

class Histogram {
 public:
  static constexpr MetricType kType = MetricType::kHistogram;

  // REQUIRES: `upper_bounds` is non-empty, finite and strictly increasing (+Inf is implied).
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  struct Data {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;  // == cumulative.back()
  };
  Data Snapshot() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

  // `labels` plus le=...: NAME_bucket per bound and +Inf, NAME_sum, NAME_count.
  void AppendSamples(const Labels& labels, std::vector<Sample>* out) const;

  // True when `bounds` is a valid argument of the constructor.
  static bool ValidBounds(absl::Span<const double> bounds);

 private:
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

}  // namespace ringsync::metrics
