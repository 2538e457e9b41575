// SteadyDeadline: a point to give up at, kept on the monotonic clock.
//
// absl::Time is the wall clock: a deadline of absl::Now() + timeout ends a wait early when
// the system clock steps forward (NTP correcting a large offset, a virtual machine resumed
// after a pause) and stretches it when the clock steps back. Every deadline ringsync keeps
// — a collective's, a WaitLimit's, a lease's, a test's polling loop — is a SteadyDeadline,
// so that only time that passed counts. Only where an API takes a wall-clock instant (a
// gRPC call's deadline) is one made, from what is left: absl::Now() + Left().
#pragma once

#include <algorithm>

#include "absl/time/time.h"
#include "core/sync/monotonic_clock.h"

namespace ringsync {

class SteadyDeadline {
 public:
  // Never passes.
  SteadyDeadline() = default;

  // `timeout` from now; absl::InfiniteDuration() never passes, a negative one has passed.
  explicit SteadyDeadline(absl::Duration timeout) : at_(MonotonicNow() + timeout) {}

  static SteadyDeadline Never() { return SteadyDeadline(); }

  bool Passed() const { return MonotonicNow() >= at_; }

  // What is left: zero once passed, absl::InfiniteDuration() for a deadline that never passes.
  absl::Duration Left() const { return std::max(at_ - MonotonicNow(), absl::ZeroDuration()); }

  // The same deadline moved by `delay` (later when positive; Never stays Never).
  SteadyDeadline operator+(absl::Duration delay) const {
    SteadyDeadline later;
    later.at_ = at_ + delay;
    return later;
  }

  // The sooner of the two is the smaller: std::min(limit, SteadyDeadline(slice)).
  friend bool operator<(const SteadyDeadline& a, const SteadyDeadline& b) { return a.at_ < b.at_; }
  friend bool operator==(const SteadyDeadline& a, const SteadyDeadline& b) {
    return a.at_ == b.at_;
  }

 private:
  absl::Time at_ = absl::InfiniteFuture();  // on MonotonicNow's clock
};

}  // namespace ringsync
