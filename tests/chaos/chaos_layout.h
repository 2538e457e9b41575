// The layout of the chaos trainer's tensors (chaos_trainer.cc), shared with the checks
// that read its results: a header that says who took part, then a payload whose exact sum
// is known.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringsync::chaos {

// Trainers one job may have (each owns a slot of the header).
inline constexpr int kChaosSlots = 8;
// [0] count, [1..8] call numbers, [9..16] next steps.
inline constexpr size_t kHeaderElements = 1 + 2 * kChaosSlots;

inline constexpr size_t CallSlot(int trainer) { return 1 + static_cast<size_t>(trainer); }
inline constexpr size_t StepSlot(int trainer) {
  return 1 + kChaosSlots + static_cast<size_t>(trainer);
}

// Every rank's contribution to element j of step s: small, so that sums of any world
// size stay exact in int64, and different per step, so a stale result cannot pass.
inline constexpr int64_t Payload(int64_t step, size_t j) {
  return static_cast<int64_t>((static_cast<uint64_t>(step) * 131 + j * 7) % 1000) + 1;
}

}  // namespace ringsync::chaos
