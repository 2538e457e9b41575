// The ring all-reduce schedule as a pure function of (rank, step, N).
//
// With N ranks the buffer is cut into N chunks (partition.h). Steps are numbered
// globally, 0 .. 2(N-1)-1:
//
//   Reduce-scatter, steps s = 0 .. N-2: rank r sends chunk (r - s - 1) mod N to rank
//   r+1 and receives chunk (r - s - 2) mod N from rank r-1, combining it into its own.
//   Chunk c starts at rank c+1 and ends, fully reduced, at rank c: afterwards rank r owns
//   chunk r, so a reduce-scatter (rank r's block r) is these N-1 steps alone.
//
//   All-gather, steps s = 0 .. N-2 (global step N-1+s): rank r sends chunk
//   (r - s) mod N and receives chunk (r - s - 1) mod N, overwriting it.
//
// The chunk a rank sends at step t+1 is the one it received at step t, which is what
// lets segments flow through a rank without waiting for whole chunks.
#pragma once

#include <cstddef>
#include <vector>

#include "core/ring/partition.h"

namespace ringsync {

enum class RingPhase { kReduceScatter, kAllGather };

struct RingStep {
  RingPhase phase;
  int phase_step;  // s within the phase
  int send_chunk;
  int recv_chunk;
};

// value mod n in [0, n) for any int value (ranks and chunks count around the ring).
// REQUIRES: n > 0.
int RingMod(int value, int n);

// Number of global steps of an all-reduce over `world_size` ranks: 2(N-1).
int AllReduceSteps(int world_size);

// REQUIRES: 0 <= rank < world_size, 0 <= step < AllReduceSteps(world_size).
RingStep AllReduceStep(int rank, int world_size, int step);

// The chunk rank r holds fully reduced after the reduce-scatter: r.
int OwnedChunk(int rank, int world_size);

// The chunks of a `count`-element all-reduce in the order rank r first reads its own
// input of them: the chunk it sends at step 0, then the chunk it combines at each step of
// the reduce-scatter — r-1, r-2, ..., r-N (mod N). A tensor copied in this order lets
// the ring start before the copy ends (input_arrival.h).
// REQUIRES: 0 <= rank < world_size.
std::vector<ElementRange> AllReduceInputOrder(int rank, int world_size, size_t count);

}  // namespace ringsync
