#include "core/ring/allreduce_algorithm.h"

namespace ringsync {

AllReduceAlgorithm ChooseAllReduceAlgorithm(int world_size, uint64_t bytes, DType /*dtype*/,
                                            ReduceOp /*op*/, const AlgorithmPolicy& policy) {
  // Every dtype and op combines alike in both algorithms (the same reducer, in the same
  // order), so today only the size decides; they stay in the signature so a future rule
  // (say, a threshold per element size) cannot be evaluated with less than every rank has.
  if (world_size < 2) return AllReduceAlgorithm::kRing;  // no hop either way
  switch (policy.mode) {
    case AlgorithmPolicy::Mode::kRing: return AllReduceAlgorithm::kRing;
    case AlgorithmPolicy::Mode::kRelay: return AllReduceAlgorithm::kRelay;
    case AlgorithmPolicy::Mode::kAuto: break;
  }
  return bytes <= policy.relay_max_bytes ? AllReduceAlgorithm::kRelay : AllReduceAlgorithm::kRing;
}

absl::string_view AlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kRelay: return "relay";
  }
  return "unknown";
}

std::optional<AlgorithmPolicy::Mode> ParseAlgorithmMode(absl::string_view text) {
  if (text == "auto") return AlgorithmPolicy::Mode::kAuto;
  if (text == "ring") return AlgorithmPolicy::Mode::kRing;
  if (text == "relay") return AlgorithmPolicy::Mode::kRelay;
  return std::nullopt;
}

}  // namespace ringsync
