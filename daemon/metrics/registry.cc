#include "daemon/metrics/registry.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "daemon/metrics/text_format.h"

namespace ringsync::metrics {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "metrics registry: %s\n", what.c_str());
  std::abort();
}

}  // namespace

void Registry::CheckNames(const std::string& name, const std::vector<std::string>& label_names) {
  if (absl::Status s = ValidateMetricName(name); !s.ok()) Die(std::string(s.message()));
  for (const std::string& label : label_names) {
    if (absl::Status s = ValidateLabelName(label); !s.ok()) {
      Die(name + ": " + std::string(s.message()));
    }
  }
  for (const auto& family : families_) {
    if (family->name() == name) Die("metric '" + name + "' is registered twice");
  }
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  CheckNames(name, label_names);
  auto family = std::make_unique<Family<Counter>>(std::move(name), std::move(help),
                                                  std::move(label_names));
  Family<Counter>& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  CheckNames(name, label_names);
  auto family = std::make_unique<Family<Gauge>>(std::move(name), std::move(help),
                                                std::move(label_names));
  Family<Gauge>& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> upper_bounds) {
  absl::MutexLock lock(&mu_);
  CheckNames(name, label_names);
  if (!Histogram::ValidBounds(upper_bounds)) {
    Die(name + ": histogram bounds must be finite and strictly increasing");
  }
  auto family = std::make_unique<Family<Histogram>>(
      std::move(name), std::move(help), std::move(label_names),
      [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); });
  Family<Histogram>& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

void Registry::AddCollector(Collector collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::vector<FamilySnapshot> Registry::Collect() const {
  absl::MutexLock scrape(&scrape_mu_);
  std::vector<const FamilyBase*> families;
  std::vector<Collector> collectors;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& family : families_) families.push_back(family.get());
    collectors = collectors_;
  }
  std::vector<FamilySnapshot> out;
  out.reserve(families.size());
  for (const FamilyBase* family : families) out.push_back(family->Collect());
  for (const Collector& collect : collectors) collect(&out);
  return out;
}

std::string Registry::TextExposition() const { return WriteTextFormat(Collect()); }

}  // namespace ringsync::metrics
