// All-reduces over stride links: the small-message algorithms for rings where the relay's
// N-1 hops per pass cost more than links beyond the neighbours (allreduce_algorithm.h).
// Every rank's spec and pre-scaled contribution reach every rank (the gather), each rank
// combines them, then a commit barrier runs, all over the links of StrideLinks
// (core/link/stride_links.h). Two schedules share that protocol and differ in which
// links a pass uses and how many rounds it takes:
//
//   kDoubling — K = ceil(log2 N) rounds. In round k (stride s = 2^k) rank r sends to rank
//   r+s what it holds of ranks r, r-1, ..., r-c+1, c = min(s, N-s), one kGather frame per
//   contribution (its origin in `chunk`, its spec beside it), and receives from rank r-s
//   those of ranks r-s, ..., r-s-c+1. After round k it holds ranks r-2s+1 .. r; after
//   round K-1, all N (Bruck's all-gather: any N, no rank left out). Its commit is a
//   dissemination barrier: in round k rank r sends a kCommit frame to rank r+s once it
//   heard round k-1's, and waits for rank r-s's.
//
//   kDirect — one round on the links of every stride 1 .. N-1: rank r sends its own
//   contribution (one kDirect frame) to every other rank, then receives every other
//   rank's; its commit likewise sends a kCommit frame to every rank and waits for every
//   rank's. One hop per pass instead of K, for N-1 frames sent per pass instead of K
//   (so for small rings: at N=4 two sequential hops instead of four).
//
// Common to both:
//   Agreement. After the gather every rank holds every rank's spec: a mismatch fails the
//   collective on every rank, as the ring's agreement does, with no byte combined.
//
//   Combine. As the relay: the N contributions in the ring's order (ring_order_combine.h),
//   so the result is bitwise the ring's on every rank.
//
//   Commit. After the barrier every rank's commit has reached every rank (directly or
//   through others), so a rank returns OK only once every rank completed its data — the
//   ring's commit rule, with the same in-doubt marking for a rank that fails inside this
//   pass (ring_exchange.h).
//
//   Aborts. A rank that gives up sends an abort frame on every link of its schedule
//   (connecting any that is not yet) and every other it has connected; each rank that
//   receives one forwards it once on all of its own. The ring link is always among them,
//   so a notice reaches every rank; the stride links make it quicker. And as a link
//   delivers in order, a rank that waits on a link for the one that gave up meets its
//   notice there before any frame of its next collective. A waiting rank watches all of
//   its links for an abort of its collective, not only the one it waits on. A rank that
//   gives up before it runs (RejectOnEveryLink) does the same.
//
// Ranks whose choice of algorithm differs (their sizes differ, or their flags) meet on
// the ring link, which every algorithm's first frame uses and each with its own kind
// (kAgree, kRelay, kGather, kDirect), so each side fails naming the difference.
//
// Cost: each rank receives (N-1) times the buffer. A round's first kStrideLinkQueuedFrames
// frames per link go out before its receives, the rest one per frame received on that
// link, so no rank ever waits on a receiver that is itself waiting to send. Small buffers
// only (DoublingMaxBytes, DirectMaxBytes).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/stride_links.h"
#include "core/reduce/reducer.h"
#include "core/ring/allreduce_algorithm.h"
#include "core/ring/ring_member.h"
#include "core/ring/stride_rank.h"

namespace ringsync {

// The schedule `algorithm` runs on stride links; nullopt for the ring and the relay.
std::optional<StrideSchedule> StrideScheduleOf(AllReduceAlgorithm algorithm);

// The stride schedule the smallest all-reduce runs over `world_size` ranks under `policy`
// (nullopt: it relays or runs the ring). Each stride algorithm runs for buffers up to a
// limit, so this is the one (if any) the policy runs at all: its links are those a
// worker connects as the ring forms.
std::optional<StrideSchedule> SmallestAllReduceSchedule(int world_size,
                                                        const AlgorithmPolicy& policy);

// Rounds of each pass of `schedule` over `world_size` ranks: ceil(log2 N) for the
// doubling, 1 for the direct exchange; 0 for one rank.
int StrideRounds(StrideSchedule schedule, int world_size);

// The strides beyond the ring link's (2 and up, ascending) whose links `schedule` uses
// over `world_size` ranks: 2, 4, ... < N for the doubling, 2 .. N-1 for the direct exchange.
std::vector<int> StridesBeyondTheRing(StrideSchedule schedule, int world_size);

// REQUIRES: as RingAllReduce, or a reduce-scatter's spec and input (N blocks): it runs the
// whole all-reduce, whose block r is bitwise the reduce-scatter's (RingReduceScatter);
// `links` are this rank's (their Stride(1) its ring link).
// Until the gather passed, `buffer` is untouched; a failure after it (in the commit
// pass) leaves the result in it, as RelayAllReduce does.
absl::Status StrideAllReduce(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                             Reducer& reducer, const CollectiveSpec& spec,
                             absl::Span<std::byte> buffer, const RingOptions& options,
                             RingStats* stats = nullptr);

}  // namespace ringsync
