// MonotonicNow: the monotonic clock as absl::Time. Differences are real durations, and a
// step of the system clock (NTP, a virtual machine resumed) never moves it, so leases,
// deadlines and stopwatches built on it neither expire early nor stretch. The epoch is
// arbitrary: never print these as dates.
#pragma once

#include <chrono>

#include "absl/time/time.h"

namespace ringsync {

inline absl::Time MonotonicNow() {
  return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace ringsync
