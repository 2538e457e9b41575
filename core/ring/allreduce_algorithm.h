// Which algorithm an all-reduce runs, as a pure function every rank evaluates alike.
//
//   kRing  — reduce-scatter + all-gather (ring_allreduce.h): an agreement pass, 2(N-1)
//            data hops, a commit pass: 4(N-1) sequential hops, each rank moving
//            2(N-1)/N of the buffer. The algorithm for large messages.
//   kRelay — every rank's whole contribution travels around the ring beside its spec
//            (relay_allreduce.h): agreement and data together in N-1 hops, then the
//            commit pass: 2(N-1) sequential hops, each rank moving (N-1) times the
//            buffer. For small messages, where hops, not bytes, cost the time.
//   kDoubling — every rank's contribution reaches every rank over links of strides 1, 2,
//            4, ... (stride_allreduce.h): 2·ceil(log2 N) sequential hops, each rank
//            moving (N-1) times the buffer. For small messages on rings of 4 or more,
//            when the transport has stride links.
//   kDirect — every rank sends its contribution to every other rank at once, over links
//            of strides 1 .. N-1 (stride_allreduce.h): 2 sequential hops whatever N, each
//            rank sending N-1 frames per pass. For small messages on small rings, where
//            N-1 frames a pass cost less than the doubling's extra hops.
//
// kAuto, for buffers within the relay's sizes (RelayMaxBytes): kDirect on rings of 3 to
// `direct_max_ranks` ranks (DirectMaxBytes), else kDoubling from `doubling_min_ranks`
// (DoublingMaxBytes), else kRelay; larger buffers run kRing. The stride algorithms take
// over the relay's sizes because they move the same bytes in fewer hops. RelayMaxBytes:
// with h one hop's time and B a link's rate, the relay is faster than the ring while the
// hops it saves outweigh the bytes it adds: 2(N-1)h > (N-1)(1 - 2/N)S/B, i.e.
// S < 2hB·N/(N-2). So the threshold is `relay_max_bytes` (≈ 2hB, the crossover of a large
// ring) times N/(N-2): twice it at N=4, 1.33x at N=8; at N=2 both move S per rank and the
// relay takes half the hops, so it runs up to 16x. Measured on one host (N=4 and 8,
// 127.0.0.1): hB ≈ 50 KB.
// No mode ever relays more than `relay_frame_limit_bytes`: the relay carries a whole
// buffer in one frame, and peers read no frame larger than a segment.
//
// The choice depends only on (N, bytes, dtype, op, policy); ranks whose policies differ
// may choose differently, and the agreement pass then fails the collective on every rank,
// naming the flags (RingExchange), so a disagreement can never mix two algorithms' data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "ringsync/dtype.h"

namespace ringsync {

enum class AllReduceAlgorithm : uint8_t { kRing = 1, kRelay = 2, kDoubling = 3, kDirect = 4 };

// The most ranks the direct exchange runs on, in any mode: it connects a link to every
// other rank, and a worker accepts that many senders a generation.
inline constexpr int kDirectRanksLimit = 16;

struct AlgorithmPolicy {
  enum class Mode : uint8_t { kAuto, kRing, kRelay, kDoubling, kDirect } mode = Mode::kAuto;
  // kAuto: the relay's crossover on a large ring (RelayMaxBytes scales it by N).
  uint64_t relay_max_bytes = 64 << 10;
  // The largest buffer the relay can carry (the peers' frame limit, --segment_bytes):
  // larger ones run the ring in every mode.
  uint64_t relay_frame_limit_bytes = 1 << 20;
  // Whether this rank's transport connects stride links (StrideLinks); without them the
  // stride algorithms are never chosen, and a forced one runs as the relay.
  bool stride_links = false;
  // The largest contribution one frame of a stride algorithm carries.
  uint64_t stride_frame_bytes = 64 << 10;
  // What a link queues for a receiver that has not read yet, for the doubling (a step
  // sends up to N/2 contributions before it receives), so that no step's sends wait on a
  // receiver that is itself sending.
  uint64_t doubling_step_bytes = 1 << 20;
  // kAuto: the smallest ring the doubling runs on (at N=3 its hops equal the relay's).
  int doubling_min_ranks = 4;
  // kAuto: the largest ring the direct exchange runs on (from N=3; 0..kDirectRanksLimit).
  int direct_max_ranks = 4;
};

// The largest all-reduce (bytes) that kAuto relays over `world_size` ranks.
uint64_t RelayMaxBytes(int world_size, const AlgorithmPolicy& policy);

// The largest all-reduce (bytes) the doubling runs over `world_size` ranks in any mode
// (0: none, e.g. without stride links).
uint64_t DoublingMaxBytes(int world_size, const AlgorithmPolicy& policy);

// The largest all-reduce (bytes) the direct exchange runs over `world_size` ranks in any
// mode (0: none, e.g. without stride links or beyond kDirectRanksLimit).
uint64_t DirectMaxBytes(int world_size, const AlgorithmPolicy& policy);

// The algorithm an all-reduce of `bytes` over `world_size` ranks runs under `policy`.
AllReduceAlgorithm ChooseAllReduceAlgorithm(int world_size, uint64_t bytes, DType dtype,
                                            ReduceOp op, const AlgorithmPolicy& policy);

// "ring", "relay", "doubling", "direct".
absl::string_view AlgorithmName(AllReduceAlgorithm algorithm);
// Parses "auto", "ring", "relay", "doubling", "direct"; nullopt for anything else.
std::optional<AlgorithmPolicy::Mode> ParseAlgorithmMode(absl::string_view text);

}  // namespace ringsync
