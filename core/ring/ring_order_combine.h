// Combining whole contributions in the ring all-reduce's order, for the algorithms that
// gather every rank's contribution first (relay_allreduce.h, stride_allreduce.h), so
// that their result is bitwise the ring's, and so identical on every rank.
//
// Element e in ring chunk c (partition.h's ChunkRange) becomes
//   x[c+N] ⊕ (… ⊕ (x[c+3] ⊕ (x[c+2] ⊕ x[c+1])))   (ranks mod N; x[c+N] is x[c])
// with each ⊕ one Reducer::Combine (dst = the later rank's contribution, src = the
// running value) and Reducer::Finalize applied once at the end — exactly the
// reduce-scatter's sequence of Combine calls for that chunk.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/reduce/reducer.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// `contributions[r]`: rank r's pre-scaled contribution, `count` elements of `esize`
// bytes each. Writes the result into `out` (count elements); adds overflows to `stats`.
absl::Status CombineInRingOrder(const RingMember& me, Reducer& reducer, const ReduceSpec& rspec,
                                size_t count, size_t esize,
                                const std::vector<absl::Span<const std::byte>>& contributions,
                                absl::Span<std::byte> out, RingStats& stats);

}  // namespace ringsync
