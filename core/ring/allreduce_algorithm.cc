#include "core/ring/allreduce_algorithm.h"

#include <algorithm>

namespace ringsync {

uint64_t RelayMaxBytes(int world_size, const AlgorithmPolicy& policy) {
  if (world_size < 2) return 0;
  constexpr uint64_t kTwoRanksFactor = 16;
  const uint64_t n = static_cast<uint64_t>(world_size);
  const uint64_t scaled = world_size == 2 ? policy.relay_max_bytes * kTwoRanksFactor
                                          : policy.relay_max_bytes * n / (n - 2);
  return std::min(scaled, policy.relay_frame_limit_bytes);
}

uint64_t DoublingMaxBytes(int world_size, const AlgorithmPolicy& policy) {
  if (world_size < 2 || !policy.stride_links) return 0;
  const uint64_t most_per_step = static_cast<uint64_t>(world_size) / 2;
  return std::min({policy.stride_frame_bytes, policy.relay_frame_limit_bytes,
                   policy.doubling_step_bytes / most_per_step});
}

uint64_t DirectMaxBytes(int world_size, const AlgorithmPolicy& policy) {
  if (world_size < 2 || world_size > kDirectRanksLimit || !policy.stride_links) return 0;
  // One frame per link and pass: the doubling's step limit does not apply.
  return std::min(policy.stride_frame_bytes, policy.relay_frame_limit_bytes);
}

namespace {

// What a forced mode runs for a buffer its algorithm cannot carry.
AllReduceAlgorithm RelayOrRing(uint64_t bytes, const AlgorithmPolicy& policy) {
  return bytes <= policy.relay_frame_limit_bytes ? AllReduceAlgorithm::kRelay
                                                 : AllReduceAlgorithm::kRing;
}

}  // namespace

AllReduceAlgorithm ChooseAllReduceAlgorithm(int world_size, uint64_t bytes, DType /*dtype*/,
                                            ReduceOp /*op*/, const AlgorithmPolicy& policy) {
  // Every dtype and op combines alike in every algorithm (the same reducer, in the same
  // order), so today only the size decides; they stay in the signature so a future rule
  // (say, a threshold per element size) cannot be evaluated with less than every rank has.
  if (world_size < 2) return AllReduceAlgorithm::kRing;  // no hop either way
  switch (policy.mode) {
    case AlgorithmPolicy::Mode::kRing: return AllReduceAlgorithm::kRing;
    case AlgorithmPolicy::Mode::kRelay: return RelayOrRing(bytes, policy);
    case AlgorithmPolicy::Mode::kDoubling:
      if (bytes <= DoublingMaxBytes(world_size, policy)) return AllReduceAlgorithm::kDoubling;
      return RelayOrRing(bytes, policy);
    case AlgorithmPolicy::Mode::kDirect:
      if (bytes <= DirectMaxBytes(world_size, policy)) return AllReduceAlgorithm::kDirect;
      return RelayOrRing(bytes, policy);
    case AlgorithmPolicy::Mode::kAuto: break;
  }
  const uint64_t relay_max = RelayMaxBytes(world_size, policy);
  // At N=2 every algorithm takes one hop a pass: the relay needs no link but the ring's.
  if (world_size >= 3 && world_size <= policy.direct_max_ranks &&
      bytes <= std::min(relay_max, DirectMaxBytes(world_size, policy))) {
    return AllReduceAlgorithm::kDirect;
  }
  if (world_size >= policy.doubling_min_ranks &&
      bytes <= std::min(relay_max, DoublingMaxBytes(world_size, policy))) {
    return AllReduceAlgorithm::kDoubling;
  }
  return bytes <= relay_max ? AllReduceAlgorithm::kRelay : AllReduceAlgorithm::kRing;
}

absl::string_view AlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kRelay: return "relay";
    case AllReduceAlgorithm::kDoubling: return "doubling";
    case AllReduceAlgorithm::kDirect: return "direct";
  }
  return "unknown";
}

std::optional<AlgorithmPolicy::Mode> ParseAlgorithmMode(absl::string_view text) {
  if (text == "auto") return AlgorithmPolicy::Mode::kAuto;
  if (text == "ring") return AlgorithmPolicy::Mode::kRing;
  if (text == "relay") return AlgorithmPolicy::Mode::kRelay;
  if (text == "doubling") return AlgorithmPolicy::Mode::kDoubling;
  if (text == "direct") return AlgorithmPolicy::Mode::kDirect;
  return std::nullopt;
}

}  // namespace ringsync
