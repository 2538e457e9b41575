// Refusals: what a daemon says when it refuses input from outside (a request too large, a
// forged frame, an unauthenticated call). Each refusal is counted in
// ringsync_refused_total{reason} and logged, at most one line per reason per interval,
// so a flood of bad input cannot flood the log: the next line says how many were not
// shown.
//
// `reason` is a short snake_case label chosen by our code (never text from the network),
// so the metric's label set stays bounded. `detail` may quote outside input; it is cut to
// kMaxDetailBytes and made one line (SanitizeText) before it reaches the log.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace ringsync::metrics {

class Refusals {
 public:
  static constexpr size_t kMaxDetailBytes = 256;

  // Registers ringsync_refused_total in `registry`; `clock` is for tests.
  // REQUIRES: `registry` outlives this object.
  explicit Refusals(prometheus::Registry& registry,
                    absl::Duration log_interval = absl::Seconds(1),
                    std::function<absl::Time()> clock = absl::Now);

  // Counts one refusal and logs "refused <reason>: <detail>" unless a line for the same
  // reason was written less than the log interval ago.
  // Returns whether it was logged (for tests).
  bool Refuse(absl::string_view reason, absl::string_view detail);

  // How many refusals were counted under `reason` (for tests).
  uint64_t Count(absl::string_view reason) const;

 private:
  struct Reason {
    prometheus::Counter* counter = nullptr;
    absl::Time last_logged = absl::InfinitePast();
    uint64_t not_logged = 0;
  };

  prometheus::Family<prometheus::Counter>& family_;
  const absl::Duration log_interval_;
  const std::function<absl::Time()> clock_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, Reason> reasons_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace ringsync::metrics
