// Gauge: a value that goes up and down (a queue depth, the current rank, a rate).
//
// Thread-safety: all methods are safe from any thread; each is one atomic operation.
#pragma once

#include <atomic>
#include <vector>

#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

class Gauge {
 public:
  static constexpr MetricType kType = MetricType::kGauge;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

  void AppendSamples(const Labels& labels, std::vector<Sample>* out) const {
    out->push_back(Sample{"", labels, value()});
  }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace ringsync::metrics
