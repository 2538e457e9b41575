// Ring scatter: the root's buffer holds one block per rank (spec.count elements, N
// blocks of count / N), and rank r ends with block r in its place. The blocks flow along
// the chain root -> root+1 -> ... -> root-1, each hop carrying only the blocks of the
// ranks after it: the root sends N-1 blocks, the farthest rank's first, and the rank d
// hops on forwards the N-1-d blocks behind its own, segment by segment as they arrive,
// before it receives its own (so every hop is busy from the start, and the last block out
// has one hop to go). So the root sends what a scatter
// must (S (N-1)/N bytes) and the chain's links run at once, where a broadcast of the whole
// buffer would carry S over every hop. The last rank then sends an empty "done" frame back
// to the root, so the root, too, returns success only once every rank has its block.
// Failure as in ring_pipeline.h; nothing moves before the ranks agree.
//
// Other ranks' blocks in a non-root rank's buffer: those it forwarded hold the root's
// bytes, the others are left as they were.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// The checks a scatter makes before anything moves, on the ring and over the stride links
// alike: the chain's (CheckChainSpec) and a count that is one block per rank.
absl::Status CheckScatterSpec(const RingMember& me, const CollectiveSpec& spec,
                              size_t buffer_bytes);

// REQUIRES: spec.kind == kScatter; 0 <= spec.root < world_size; spec.count a multiple of
// world_size; buffer.size() == spec.count * dtype size.
absl::Status RingScatter(const RingMember& me, Link& link, const CollectiveSpec& spec,
                         absl::Span<std::byte> buffer, const RingOptions& options,
                         RingStats* stats = nullptr);

}  // namespace ringsync
