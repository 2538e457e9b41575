// Doubling all-reduce: the small-message algorithm for rings where the relay's N-1 hops
// per pass cost more than links beyond the neighbours (allreduce_algorithm.h). Every
// rank's spec and pre-scaled contribution reach every rank in K = ceil(log2 N) steps,
// over the stride links of StrideLinks (core/link/stride_links.h):
//
//   Gather (agreement and data together). In step k (stride s = 2^k) rank r sends to
//   rank r+s what it holds of ranks r, r-1, ..., r-c+1, c = min(s, N-s), one kGather
//   frame per contribution (its origin in `chunk`, its spec beside it), and receives from
//   rank r-s those of ranks r-s, ..., r-s-c+1. After step k it holds ranks
//   r-2s+1 .. r; after step K-1, all N (Bruck's all-gather: any N, no rank left out).
//   Every rank then holds every rank's spec: a mismatch fails the collective on every
//   rank, as the ring's agreement does, with no byte combined.
//
//   Combine. As the relay: the N contributions in the ring's order
//   (ring_order_combine.h), so the result is bitwise the ring's on every rank.
//
//   Commit. A dissemination barrier on the same links: in step k rank r sends a kCommit
//   frame to rank r+s once it heard step k-1's, and waits for rank r-s's. After K steps
//   every rank's commit has reached every rank (through others), so a rank returns OK
//   only once every rank completed its data — the ring's commit rule, with the same
//   in-doubt marking for a rank that fails inside this pass (ring_exchange.h).
//
//   Aborts. A rank that gives up sends an abort frame on every link it has connected;
//   each rank that receives one forwards it once on all of its own. The ring link is
//   always among them, so a notice reaches every rank; the stride links make it quicker.
//   A waiting rank watches all of its links for an abort of its collective, not only the
//   one it waits on.
//
// Ranks whose choice of algorithm differs (their sizes differ, or their flags) meet on
// the ring link, which step 0 uses: the ring's and the relay's first frames are not
// kGather, so each side fails naming the difference.
//
// Cost: 2K sequential hops (the relay's 2(N-1)), each rank receiving (N-1) times the
// buffer. A step's first kStrideLinkQueuedFrames frames go out before its receives, the
// rest one per frame received, so up to N=8 a step costs one wake-up, and no rank ever
// waits on a receiver that is itself waiting to send. Small buffers only
// (DoublingMaxBytes): each rank receives N-1 of them.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/collective.h"
#include "core/link/stride_links.h"
#include "core/reduce/reducer.h"
#include "core/ring/ring_member.h"

namespace ringsync {

// Steps of each pass over `world_size` ranks: ceil(log2 N) (0 for one rank).
int DoublingSteps(int world_size);

// REQUIRES: as RingAllReduce; `links` are this rank's (their Stride(1) its ring link).
// Until the gather passed, `buffer` is untouched; a failure after it (in the commit
// pass) leaves the result in it, as RelayAllReduce does.
absl::Status DoublingAllReduce(const RingMember& me, StrideLinks& links, Reducer& reducer,
                               const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                               const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
