// SteadyDeadline: a point to give up at, kept on the monotonic clock.
//
// absl::Time is the wall clock: a deadline of absl::Now() + timeout ends a wait early when
// the system clock steps forward (NTP correcting a large offset, a virtual machine resumed
// after a pause) and stretches it when the clock steps back. A loop that polls until a
// deadline — waiting for a child process, a port file, a count of steps — holds a
// SteadyDeadline instead, so that only time that passed counts.
#pragma once

#include <algorithm>

#include "absl/time/time.h"
#include "core/sync/monotonic_clock.h"

namespace ringsync {

class SteadyDeadline {
 public:
  // `timeout` from now; absl::InfiniteDuration() never passes, a negative one has passed.
  explicit SteadyDeadline(absl::Duration timeout) : at_(MonotonicNow() + timeout) {}

  bool Passed() const { return MonotonicNow() >= at_; }

  // What is left: zero once passed, absl::InfiniteDuration() for a deadline that never passes.
  absl::Duration Left() const { return std::max(at_ - MonotonicNow(), absl::ZeroDuration()); }

 private:
  absl::Time at_;  // on MonotonicNow's clock
};

}  // namespace ringsync
