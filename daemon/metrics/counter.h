// Counter: a value that only goes up (events, bytes, seconds), reset only by a
// restart of the process. Prometheus' rate() relies on that.
//
// Thread-safety: all methods are safe from any thread; Increment is one atomic add.
#pragma once

#include <atomic>
#include <vector>

#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

class Counter {
 public:
  static constexpr MetricType kType = MetricType::kCounter;

  // Adds `by`. Negative, zero and NaN amounts are ignored: a counter never goes back.
  void Increment(double by = 1.0) {
    if (by > 0) value_.fetch_add(by, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

  void AppendSamples(const Labels& labels, std::vector<Sample>* out) const {
    out->push_back(Sample{"", labels, value()});
  }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace ringsync::metrics
