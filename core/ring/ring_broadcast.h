// Ring broadcast: the root's buffer flows along the ring root -> root+1 -> ... ->
// root-1 as a pipelined chain of segments (time about S/B plus one segment per hop;
// ChainSegmentBytes cuts even a buffer of one segment into several, so that the hops
// overlap).
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

// The segment size of a chain broadcast of `buffer_bytes`: about an eighth of the
// buffer, at least 128 KiB, at most `segment_bytes` (RingOptions). Every rank computes
// the same from the spec and its options.
size_t ChainSegmentBytes(size_t buffer_bytes, size_t segment_bytes);

// REQUIRES: spec.kind == kBroadcast; 0 <= spec.root < world_size;
// buffer.size() == spec.count * dtype size.
absl::Status RingBroadcast(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats = nullptr);

}  // namespace ringsync
