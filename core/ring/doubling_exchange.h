// An all-to-all's data on a ring larger than kDirectRanksLimit, whose workers link only to
// the ranks 1, 2, 4, ... away (the doubling's stride links), not to every other: Bruck's
// exchange. Each rank first holds its block for rank+i at position i. In round k (stride
// s = 2^k, ceil(log2 N) rounds) it sends rank+s, as one message, every block at a
// position with bit k set, and puts what rank-s sends it in those positions; a block
// thus hops the strides of its distance's bits and reaches rank+i, still at position i,
// which then holds the block from rank-i. A round carries about half the blocks: ~S/2 x
// log2 N bytes sent a rank in all, where the direct transfer sends (N-1)/N x S; it is
// the price of log2 N links instead of N-1.
//
// Uneven blocks are sized from every rank's spec (the agreement pass brought them): the
// block at position i after round k came from rank - (i mod 2^(k+1)).
#pragma once

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ring/ring_member.h"
#include "core/ring/stride_rank.h"

namespace ringsync {

// The data pass of an all-to-all over `rank` (StrideRank: between its Gather and its
// Commit). `routes` by rank as StrideRank::Transfer takes them: this rank's block for
// rank r is routes[r].send, and rank r's block for this one lands in routes[r].receive
// (this rank's own route is left alone: an even all-to-all's own block stays in place, an
// uneven one's the caller copies). `block_bytes(from, to)`: the size of rank from's block
// for rank to, alike on every rank. An even all-to-all in place keeps the blocks in
// transit in its buffer (and a round's outgoing and incoming ones beside it: about S in
// all); uneven blocks, whose sizes change as they hop, in memory of their own (about
// 2 x S). Segments of up to `segment_bytes`.
absl::Status DoublingExchange(StrideRank& rank, const RingMember& me,
                              absl::Span<const DirectRoute> routes,
                              absl::FunctionRef<size_t(int from, int to)> block_bytes,
                              size_t segment_bytes);

}  // namespace ringsync
