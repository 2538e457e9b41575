// Large scatters, gathers and all-to-alls straight between the ranks whose blocks they
// are, over the stride links (core/link/stride_links.h): the root's block for rank r goes
// to rank r, or rank r's block to the root, or rank q's block r to rank r, in one hop.
// The ring's chains (ring_scatter.h, ring_gather.h) carry the block of the rank d hops
// from the root over d links: the root sends or receives what it does in the chain,
// (N-1)/N of the buffer, but the other ranks move one block each instead of up to N-1.
// On one host, where every hop is two copies through shared memory, that halves the
// copies at N=4; across hosts the root's link carries the same bytes either way. An
// all-to-all has no ring algorithm: every rank sends and receives (N-1)/N of its buffer
// (beyond kDirectRanksLimit ranks, which link only to the doubling's strides, its data
// hops those instead: doubling_exchange.h).
// (The small ones travel whole in the gather pass: stride_copying.h.)
//
// Protocol, over StrideRank (stride_rank.h):
//   Agreement. The gather pass of the small all-reduce's schedule at this ring size
//   (links a worker connects as the ring forms), carrying specs only: ranks whose specs
//   differ fail before any byte moves, as the chains' do.
//   Data. StrideRank::Transfer: segments of up to RingOptions::segment_bytes on the
//   links of the strides between the root and each rank (connected on first use).
//   Commit. The same schedule's commit barrier: a rank returns OK only once every rank
//   completed its data; a failure in it is in doubt, as the chains'.
//
// Buffers and results as the ring's algorithm for the kind takes them (the executor
// chooses between the two alike on every rank): a scatter's N blocks at the root, rank r
// writing only block r of its buffer; a gather's N slots with each rank's input in the
// first, the root ending with all N in rank order (its own moved to its slot), the others'
// buffers left as they were. Ranks that chose differently (the chains, by their flags)
// meet on the ring link and fail naming the difference. An all-to-all runs in place:
// rank r's buffer holds N blocks, block q for rank q, and ends with rank q's block r as
// its block q (its own stays); each segment lands once the one it replaces has gone.
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

// The schedule of a direct transfer's agreement and commit passes when a scatter or
// gather of `spec` over `world_size` ranks runs as one under `policy`: one too large for
// the stride links' gather pass (StrideScheduleToCopy), on 3 to kDirectRanksLimit ranks
// with stride links, in modes auto and direct. An all-to-all too large for the gather
// pass runs as one in every mode wherever there are stride links (it has no other way):
// beyond kDirectRanksLimit ranks over the doubling's links, its data as DoublingExchange
// moves it (doubling_exchange.h). nullopt where it runs otherwise. Every rank evaluates
// it alike.
std::optional<StrideSchedule> DirectTransferSchedule(const CollectiveSpec& spec, int world_size,
                                                     const AlgorithmPolicy& policy);

// The checks an all-to-all makes before anything moves, over either path: a buffer of
// spec.count elements, one block for each rank.
absl::Status CheckAllToAllSpec(const RingMember& me, const CollectiveSpec& spec,
                               size_t buffer_bytes);

// REQUIRES: spec.kind is kScatter, kGather or kAllToAll; `buffer` as the ring's algorithm for the
// kind takes it (see above); `links` are this rank's.
absl::Status DirectTransfer(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                            const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                            const RingOptions& options, RingStats* stats = nullptr);

}  // namespace ringsync
