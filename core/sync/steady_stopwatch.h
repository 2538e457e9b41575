// SteadyStopwatch: how long since it started, on the monotonic clock — what a test's
// "released within 10 s" measures. absl::Now() - start would count a step of the system
// clock (NTP, a virtual machine resumed) as time that passed (see steady_deadline.h).
#pragma once

#include <chrono>

#include "absl/time/time.h"

namespace ringsync {

class SteadyStopwatch {
 public:
  SteadyStopwatch() : start_(std::chrono::steady_clock::now()) {}

  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ringsync
