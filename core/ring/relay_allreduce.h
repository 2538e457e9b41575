// Relay all-reduce: the small-message algorithm (allreduce_algorithm.h). It runs over
// the same ring Link as the ring all-reduce, so it is fenced, ordered and aborted alike.
//
// Agreement and data together. Each rank pre-scales a copy of its buffer (the caller's
// buffer stays untouched until the outcome is known) and sends it with its spec to its
// right neighbour in a kRelay frame; for N-1 steps each rank forwards what it received
// (RingExchange::AgreeCarrying). Afterwards every rank holds every rank's spec and
// contribution: a mismatching spec fails the collective on every rank, as the ring's
// agreement does, with no byte combined.
//
// Combine order. Every rank combines the N contributions in the order the ring
// all-reduce does, so the result is bitwise the ring's (and so identical on every rank),
// for every dtype and op: element e in ring chunk c (partition.h's ChunkRange) is
//   x[c+N] ⊕ (… ⊕ (x[c+3] ⊕ (x[c+2] ⊕ x[c+1])))   (ranks mod N; x[c+N] is x[c])
// with each ⊕ one Reducer::Combine (dst = the later rank's contribution, src = the
// running value) and Reducer::Finalize applied once at the end — exactly the
// reduce-scatter's sequence of Combine calls for that chunk.
//
// Commit. The result is written into `buffer` and the commit pass (RingExchange::Commit)
// runs: OK only once every rank holds its result, with the ring's in-doubt rules.
//
// Cost: 2(N-1) sequential hops of small frames (the ring needs 4(N-1)); each rank sends
// and receives (N-1) times the buffer, so it is for small buffers only.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/reduce/reducer.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// REQUIRES: as RingAllReduce. Until the agreement passed, `buffer` is untouched; a
// failure after it (in the commit pass) leaves the result in it, as RingAllReduce may
// leave partial results: callers that must keep their input run on a copy.
absl::Status RelayAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                            const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                            const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
