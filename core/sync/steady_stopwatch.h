// SteadyStopwatch: how long since it started, on the monotonic clock — what a test's
// "released within 10 s" measures. absl::Now() - start would count a step of the system
// clock (NTP, a virtual machine resumed) as time that passed (see monotonic_clock.h).
#pragma once

#include "absl/time/time.h"
#include "core/sync/monotonic_clock.h"

namespace ringsync {

class SteadyStopwatch {
 public:
  SteadyStopwatch() : start_(MonotonicNow()) {}

  absl::Duration Elapsed() const { return MonotonicNow() - start_; }

 private:
  absl::Time start_;  // on MonotonicNow's clock
};

}  // namespace ringsync
