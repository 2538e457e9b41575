// Small broadcasts, scatters, gathers, all-gathers and all-to-alls over stride links: the
// gather pass of the stride all-reduce (stride_rank.h) brings every rank's spec and
// contribution to every rank in one hop (direct) or ceil(log2 N) hops (doubling), where
// the ring's chains and its all-gather take N-1; each rank then copies its result out of
// what arrived, and the commit barrier runs. What each rank contributes, and keeps:
//
//   broadcast  — the root its buffer, the others nothing; every rank keeps the root's.
//   scatter    — the root its N blocks, the others nothing; rank r writes block r into
//                its place in its buffer (the other blocks stay as they were).
//   gather     — every rank its block, from the first slot of its buffer of N slots (as
//                RingGatherFromFirstSlot takes it); the root writes all N in rank order,
//                the others leave their buffer as it was.
//   all-gather — as the gather, but every rank writes all N (RingAllGatherFromFirstSlot).
//   all-to-all — every rank its whole buffer of N blocks; rank r writes rank q's block r
//                as its block q (its own stays): direct_transfer.h's layout.
//
// The buffers are those of the ring's algorithm for the kind, and so are the results.
// Agreement, failure and outcome as the stride all-reduce's: ranks whose specs differ
// fail before any byte is written; the buffer is untouched until the gather passed, and
// a failure in the commit pass leaves the result in it (RingStats::buffer_untouched).
// Ranks that chose differently (one the stride schedule, another the ring's) meet on the
// ring link and fail naming the difference.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/stride_links.h"
#include "core/ring/allreduce_algorithm.h"
#include "core/ring/ring_member.h"
#include "core/ring/stride_rank.h"

namespace ringsync {

// The stride schedule a broadcast, scatter, gather, all-gather or all-to-all of `spec`
// runs over `world_size` ranks under `policy`: the one an all-reduce of its largest
// contribution would run (a contribution travels as one frame, as an all-reduce's does);
// nullopt for the ring's own algorithm (and for any other kind). Every rank evaluates it
// alike.
std::optional<StrideSchedule> StrideScheduleToCopy(const CollectiveSpec& spec, int world_size,
                                                   const AlgorithmPolicy& policy);

// REQUIRES: spec.kind is one of the five; `buffer` as the ring's algorithm for the kind
// (direct_transfer.h's for an all-to-all) takes it (see above); `links` are this rank's
// (their Stride(1) its ring link).
absl::Status StrideCopy(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                        const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                        const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
