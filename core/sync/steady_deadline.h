// SteadyDeadline: a point to give up at, kept on the monotonic clock.
//
// absl::Time is the wall clock: a deadline of absl::Now() + timeout ends a wait early when
// the system clock steps forward (NTP correcting a large offset, a virtual machine resumed
// after a pause) and stretches it when the clock steps back. A loop that polls until a
// deadline — waiting for a child process, a port file, a count of steps — holds a
// SteadyDeadline instead, so that only time that passed counts.
#pragma once

#include <algorithm>
#include <chrono>

#include "absl/time/time.h"

namespace ringsync {

class SteadyDeadline {
 public:
  // `timeout` from now; absl::InfiniteDuration() never passes, a negative one has passed
  // (one longer than a year counts as a year: the clock's range is not a test's concern).
  explicit SteadyDeadline(absl::Duration timeout)
      : never_(timeout == absl::InfiniteDuration()),
        at_(never_ ? Clock::time_point::max()
                   : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        absl::ToChronoNanoseconds(std::clamp(
                                            timeout, -kLongest, kLongest)))) {}

  bool Passed() const { return !never_ && Clock::now() >= at_; }

  // What is left: zero once passed, absl::InfiniteDuration() for a deadline that never passes.
  absl::Duration Left() const {
    if (never_) return absl::InfiniteDuration();
    return std::max(absl::FromChrono(at_ - Clock::now()), absl::ZeroDuration());
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr absl::Duration kLongest = absl::Hours(24 * 365);
  bool never_;
  Clock::time_point at_;
};

}  // namespace ringsync
