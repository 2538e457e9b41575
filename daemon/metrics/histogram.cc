#include "daemon/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "daemon/metrics/text_format.h"

namespace ringsync::metrics {

bool Histogram::ValidBounds(absl::Span<const double> bounds) {
  if (bounds.empty()) return false;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) return false;
    if (i > 0 && !(bounds[i - 1] < bounds[i])) return false;
  }
  return true;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  if (!ValidBounds(bounds_)) {
    std::fprintf(stderr, "metrics: histogram bounds must be finite and strictly increasing\n");
    std::abort();
  }
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // The first bound >= value (le is inclusive); NaN counts in +Inf only.
  const size_t index =
      std::isnan(value) ? bounds_.size()
                        : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(),
                                                               value) -
                                              bounds_.begin());
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Data Histogram::Snapshot() const {
  Data data;
  data.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    data.cumulative[i] = running;
  }
  data.count = running;
  data.sum = sum_.load(std::memory_order_relaxed);
  return data;
}

void Histogram::AppendSamples(const Labels& labels, std::vector<Sample>* out) const {
  const Data data = Snapshot();
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
    out->push_back(Sample{"_bucket", std::move(with_le), static_cast<double>(data.cumulative[i])});
  }
  out->push_back(Sample{"_sum", labels, data.sum});
  out->push_back(Sample{"_count", labels, static_cast<double>(data.count)});
}

}  // namespace ringsync::metrics
