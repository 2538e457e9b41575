// Which algorithm an all-reduce runs, as a pure function every rank evaluates alike.
//
//   kRing  — reduce-scatter + all-gather (ring_allreduce.h): an agreement pass, 2(N-1)
//            data hops, a commit pass: 4(N-1) sequential hops, each rank moving
//            2(N-1)/N of the buffer. The algorithm for large messages.
//   kRelay — every rank's whole contribution travels around the ring beside its spec
//            (relay_allreduce.h): agreement and data together in N-1 hops, then the
//            commit pass: 2(N-1) sequential hops, each rank moving (N-1) times the
//            buffer. For small messages, where hops, not bytes, cost the time.
//
// kAuto picks kRelay for buffers of at most `relay_max_bytes`, else kRing. The choice
// depends only on (N, bytes, dtype, op, policy); ranks whose policies differ choose
// differently, and the agreement pass then fails the collective on every rank, naming
// the flags (RingExchange), so a disagreement can never mix two algorithms' data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "ringsync/dtype.h"

namespace ringsync {

enum class AllReduceAlgorithm : uint8_t { kRing = 1, kRelay = 2 };

struct AlgorithmPolicy {
  enum class Mode : uint8_t { kAuto, kRing, kRelay } mode = Mode::kAuto;
  // kAuto: the largest buffer the relay algorithm runs.
  uint64_t relay_max_bytes = 16 << 10;
};

// The algorithm an all-reduce of `bytes` over `world_size` ranks runs under `policy`.
AllReduceAlgorithm ChooseAllReduceAlgorithm(int world_size, uint64_t bytes, DType dtype,
                                            ReduceOp op, const AlgorithmPolicy& policy);

// "ring", "relay".
absl::string_view AlgorithmName(AllReduceAlgorithm algorithm);
// Parses "auto", "ring", "relay"; nullopt for anything else.
std::optional<AlgorithmPolicy::Mode> ParseAlgorithmMode(absl::string_view text);

}  // namespace ringsync
