#include "core/ring/schedule.h"

namespace ringsync {

int RingMod(int value, int n) { return ((value % n) + n) % n; }

int AllReduceSteps(int world_size) { return 2 * (world_size - 1); }

int OwnedChunk(int rank, int world_size) { return RingMod(rank, world_size); }

RingStep AllReduceStep(int rank, int world_size, int step) {
  const int n = world_size;
  if (step < n - 1) {
    return {RingPhase::kReduceScatter, step, RingMod(rank - step - 1, n),
            RingMod(rank - step - 2, n)};
  }
  const int s = step - (n - 1);
  return {RingPhase::kAllGather, s, RingMod(rank - s, n), RingMod(rank - s - 1, n)};
}

std::vector<ElementRange> AllReduceInputOrder(int rank, int world_size, size_t count) {
  std::vector<ElementRange> order;
  order.reserve(world_size);
  for (int k = 0; k < world_size; ++k) {
    order.push_back(ChunkRange(count, world_size, RingMod(rank - 1 - k, world_size)));
  }
  return order;
}

}  // namespace ringsync
