#include "core/ring/schedule.h"

namespace ringsync {
namespace {

int Mod(int value, int n) { return ((value % n) + n) % n; }

}  // namespace

int AllReduceSteps(int world_size) { return 2 * (world_size - 1); }

int OwnedChunk(int rank, int world_size) { return Mod(rank + 1, world_size); }

RingStep AllReduceStep(int rank, int world_size, int step) {
  const int n = world_size;
  if (step < n - 1) {
    return {RingPhase::kReduceScatter, step, Mod(rank - step, n), Mod(rank - step - 1, n)};
  }
  const int s = step - (n - 1);
  return {RingPhase::kAllGather, s, Mod(rank - s + 1, n), Mod(rank - s, n)};
}

}  // namespace ringsync
