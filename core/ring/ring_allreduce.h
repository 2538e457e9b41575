// Ring all-reduce over a Link, in place. The schedule is schedule.h; this file adds
// the pipeline that makes it fast and the rules that make it safe.
//
// Pipeline. Each chunk travels as segments of RingOptions::segment_bytes. A sender
// thread walks the schedule and sends segment j of step t as soon as segment j of step
// t-1 has been received and combined (the chunk sent at t+1 is the one received at t),
// while the calling thread receives, combines and finalizes. So a segment flows through
// a rank without waiting for its whole chunk, and receiving, reducing and sending
// overlap. Back-pressure is the link's bounded queue.
//
// In place. The only buffer proportional to the tensor is the caller's: received
// segments are combined straight from the link's segment buffer into `buffer`. Before
// the all-gather overwrites a region, the rank waits until its own earlier send of that
// region has completed.
//
// Failure. Every wait ends at the collective's deadline. Any failure (disagreeing
// specs, a malformed frame, a timeout, a peer that gave up) cancels the local sender,
// tells the rest of the ring through an abort frame, and returns a status naming this
// rank, the generation and the collective. On failure `buffer` holds partial results:
// callers that must keep their input (the daemon does) run on a copy.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/reduce/reducer.h"
#include "core/collective.h"
#include "core/link/link.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// REQUIRES: spec.kind == kAllReduce; buffer.size() == spec.count * DTypeSize(spec.dtype).
// Violations are reported as InvalidArgument before anything is sent.
// What every all-reduce algorithm checks before anything is sent: the kind (an
// all-reduce, or a barrier of nothing), the reduction, the buffer's size.
absl::Status CheckAllReduceArguments(const RingMember& me, const CollectiveSpec& spec,
                                     absl::Span<std::byte> buffer, const ReduceSpec& rspec);
// The same for a reduce-scatter: the kind, the reduction, the buffer's size, and a count
// that is one block per rank.
absl::Status CheckReduceScatterArguments(const RingMember& me, const CollectiveSpec& spec,
                                         absl::Span<std::byte> buffer, const ReduceSpec& rspec);

absl::Status RingAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                           const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                           const RingOptions& options, RingStats* stats = nullptr);

// Ring reduce-scatter, in place: `buffer` holds this rank's N blocks (spec.count elements,
// a multiple of N); on success block `me.rank` (ChunkRange(count, N, rank)) holds that
// block reduced over every rank, bitwise the all-reduce's chunk `rank` — these are the
// all-reduce's first N-1 steps, its reduce-scatter, which leaves each chunk finished at
// the rank it names (schedule.h). The other blocks hold partial results. Each rank sends
// and receives (N-1)/N x S bytes, half of what an all-reduce moves.
// REQUIRES: spec.kind == kReduceScatter; buffer.size() == spec.count * DTypeSize(spec.dtype);
// spec.count % N == 0. Violations are reported as InvalidArgument on every rank.
absl::Status RingReduceScatter(const RingMember& me, Link& link, Reducer& reducer,
                               const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                               const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
