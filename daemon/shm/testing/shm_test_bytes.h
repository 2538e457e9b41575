// For the shared-memory tests: recognisable bytes, a wait limit, a peer that never goes.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/time/clock.h"
#include "core/sync/wait_limit.h"

namespace ringsync::testing {

// `size` bytes that differ with `seed` and along the buffer.
inline std::vector<std::byte> Pattern(size_t size, int seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return bytes;
}

inline WaitLimit Within(absl::Duration d) { return WaitLimit{SteadyDeadline(d), nullptr}; }

// The `gone` of a peer that stays.
inline const std::function<bool()> kAlive = [] { return false; };

}  // namespace ringsync::testing
