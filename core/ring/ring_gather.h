// Ring gather: every rank's contribution (spec.count elements) reaches the root, which
// ends with the N contributions in rank order (world_size x spec.count elements). The
// blocks flow along the chain root+1 -> root+2 -> ... -> root, each hop carrying only the
// blocks of the ranks before it: the rank d hops after the root sends its own block
// first (so every hop of the chain is busy from the start), then forwards the d-1 blocks
// from behind it, segment by segment as they arrive; the root receives N-1 blocks. So
// the root receives what a gather must (S (N-1)/N bytes of its S-byte result) and the
// chain's links run at once, where an all-gather carries N-1 blocks over every hop.
// Failure and outcome as in ring_pipeline.h; nothing moves before the ranks agree.
//
// Every rank's buffer holds world_size x spec.count elements with its contribution in
// the first slot (as a client sends it: it knows its input, not its rank); it moves to
// the rank's own slot once the ranks agree, and the blocks a rank receives arrive into
// theirs. So the root's buffer ends as the gather's result; the rank d hops after the
// root ends with the blocks of ranks root+1..root+d in their slots, and the rest as it
// was but for the first slot, which it moved.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// The checks a gather makes before anything moves, on the ring and over the stride links
// alike: the chain's (CheckChainSpec) over a buffer of world_size x spec.count elements.
absl::Status CheckGatherSpec(const RingMember& me, const CollectiveSpec& spec,
                             size_t buffer_bytes);

// REQUIRES: spec.kind == kGather; 0 <= spec.root < world_size;
// buffer.size() == world_size * spec.count * dtype size.
absl::Status RingGatherFromFirstSlot(const RingMember& me, Link& link, const CollectiveSpec& spec,
                                     absl::Span<std::byte> buffer, const RingOptions& options,
                                     RingStats* stats = nullptr);

}  // namespace ringsync
