// Ring all-gather, in place: `buffer` holds world_size x spec.count elements and this
// rank's contribution is already at chunk `rank`. N-1 steps: at step s rank r sends
// chunk (r - s) mod N and receives chunk (r - s - 1) mod N, each segment forwarded as
// soon as it arrives. Afterwards every rank holds every chunk, bitwise identical.
// Failure semantics as in ring_pipeline.h.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// REQUIRES: spec.kind == kAllGather; buffer.size() == world_size * count * dtype size.
absl::Status RingAllGather(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats = nullptr);

// As RingAllGather, but this rank's contribution arrives in the first slot of `buffer`,
// as a client sends it (it knows its input, not its rank); it moves to slot `rank` once
// the ranks agree.
absl::Status RingAllGatherFromFirstSlot(const RingMember& me, Link& link,
                                        const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                                        const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
