// Family: one metric name with its HELP text and label names, and one metric (Counter,
// Gauge or Histogram) per set of label values, created on first use:
//
//   Family<Counter>& bytes = registry.AddCounter("ringsync_ring_bytes_sent_total", "...",
//                                                {"peer_rank"});
//   bytes.WithLabels({"2"}).Increment(4096);
//
// WithLabels returns a reference that stays valid as long as the family (callers on a
// hot path may keep it). Label values are free text; the text format escapes them.
//
// Thread-safety: all methods are safe from any thread. WithLabels takes a mutex;
// updating the returned metric is lock-free.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

// What the Registry needs of every family, whatever its metric type.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual FamilySnapshot Collect() const = 0;
  virtual const std::string& name() const = 0;
};

template <typename Metric>
class Family final : public FamilyBase {
 public:
  using Factory = std::function<std::unique_ptr<Metric>()>;

  // REQUIRES: the names are valid (see snapshot.h); the Registry checks them.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         Factory make = [] { return std::make_unique<Metric>(); })
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        make_(std::move(make)) {}

  // The metric of these label values, in the order of label_names().
  // REQUIRES: label_values.size() == label_names().size().
  Metric& WithLabels(absl::Span<const std::string> label_values) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::string> key(label_values.begin(), label_values.end());
    key.resize(label_names_.size());  // a wrong arity still yields a well-formed series
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Metric>& metric = metrics_[std::move(key)];
    if (metric == nullptr) metric = make_();
    return *metric;
  }
  // The metric of a family without labels.
  Metric& Get() { return WithLabels({}); }

  const std::string& name() const override { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  FamilySnapshot Collect() const override ABSL_LOCKS_EXCLUDED(mu_) {
    FamilySnapshot snapshot{name_, help_, Metric::kType, {}};
    absl::MutexLock lock(&mu_);
    for (const auto& [values, metric] : metrics_) {
      Labels labels;
      labels.reserve(values.size());
      for (size_t i = 0; i < values.size(); ++i) labels.emplace_back(label_names_[i], values[i]);
      metric->AppendSamples(labels, &snapshot.samples);
    }
    return snapshot;
  }

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const Factory make_;
  mutable absl::Mutex mu_;
  // Ordered, so every scrape lists series in the same order.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> metrics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync::metrics
