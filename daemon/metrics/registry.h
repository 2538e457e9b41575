// Registry: every metric a process exports. Instrumented code registers families
// (counters, gauges, histograms) once at start-up and updates them; values read from
// elsewhere at scrape time (/proc, the coordinator's membership, the ring's state) come
// from collectors, callbacks that append whole families when the registry is scraped.
//
//   metrics::Registry registry;
//   auto& done = registry.AddCounter("ringsync_collectives_total", "Collectives run.",
//                                    {"kind", "dtype", "result"});
//   registry.AddCollector([&](std::vector<metrics::FamilySnapshot>* out) { ... });
//   std::string page = registry.TextExposition();  // for GET /metrics
//
// Registering an invalid or duplicate name is a programming error: the process aborts
// with a message naming it (at start-up, where tests catch it).
//
// Thread-safety: all methods are safe from any thread. Collectors run on the scraping
// thread, one scrape at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics/counter.h"
#include "daemon/metrics/family.h"
#include "daemon/metrics/gauge.h"
#include "daemon/metrics/histogram.h"
#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

class Registry {
 public:
  using Collector = std::function<void(std::vector<FamilySnapshot>* out)>;

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The family lives as long as the registry.
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  // REQUIRES: Histogram::ValidBounds(upper_bounds).
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> upper_bounds);

  void AddCollector(Collector collector);

  // Registered families in registration order, then what the collectors appended.
  std::vector<FamilySnapshot> Collect() const;
  // Collect() in Prometheus' text exposition format 0.0.4.
  std::string TextExposition() const;

 private:
  void CheckNames(const std::string& name, const std::vector<std::string>& label_names)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex scrape_mu_;  // one scrape at a time: collectors need not be reentrant
};

}  // namespace ringsync::metrics
