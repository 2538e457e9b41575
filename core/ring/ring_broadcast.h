// Ring broadcast: the root's buffer flows along the ring root -> root+1 -> ... ->
// root-1 as a pipelined chain of segments (time about S/B plus one segment per hop;
// ChainSegmentBytes cuts even a buffer of one segment into several, so that the hops
// overlap, and a large buffer into enough that the hops' fill is a small part of it).
// The last rank then sends an empty "done" frame back to the root, so the root, too,
// returns success only once every rank has the data. Failure as in ring_pipeline.h.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// The checks a chain from or to the root (the broadcast, the scatter, the gather: `kind`)
// makes first: the buffer holds `elements` elements, the spec is of `kind`, and its root
// is a rank.
absl::Status CheckChainSpec(const RingMember& me, const CollectiveSpec& spec,
                            size_t buffer_bytes, size_t elements, CollectiveKind kind);

// How a chain (the broadcast, the scatter, the gather) cuts `bytes` into segments: into
// `pieces` of equal size, but none smaller than `min_segment_bytes` (the ring's
// RingExchange::min_segment_bytes) nor larger than `max_segment_bytes`
// (RingOptions::segment_bytes). Every rank computes the same from the spec, its options
// and the agreement.
size_t ChainSegmentBytes(size_t bytes, size_t pieces, size_t min_segment_bytes,
                         size_t max_segment_bytes);

// The fewest pieces a chain cuts a buffer (or a scatter's or gather's block) into.
inline constexpr size_t kMinChainPieces = 8;

// The pieces a broadcast cuts its buffer into on a ring of `world_size`. A chain of N-1
// hops cut into m pieces takes about N-2+m piece times: 32 pieces a hop after the first
// keep that fill within 1/33 of the time (N=4: 64). At least kMinChainPieces.
size_t BroadcastPieces(int world_size);

// REQUIRES: spec.kind == kBroadcast; 0 <= spec.root < world_size;
// buffer.size() == spec.count * dtype size.
absl::Status RingBroadcast(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats = nullptr);

}  // namespace ringsync
