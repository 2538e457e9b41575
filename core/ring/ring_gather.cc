#include "core/ring/ring_gather.h"

#include <algorithm>
#include <cstring>

#include "core/ring/ring_broadcast.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {
namespace {

// Chunk d (1..N-1) is the block of the rank d hops after the root. Every frame a rank
// sends carries its own distance from the root as its step. A rank sends its own block
// first, then each block from behind it as it arrives (the nearest rank's last).
PipelinePlan ChainPlan(int distance, int n) {
  PipelinePlan plan;
  if (distance == 0) {
    for (int chunk = n - 1; chunk >= 1; --chunk) plan.steps.push_back({n - 1, -1, chunk});
    return plan;
  }
  plan.steps.push_back({distance, distance, -1});
  for (int chunk = distance - 1; chunk >= 1; --chunk) {
    plan.steps.push_back({distance - 1, -1, chunk});
    plan.steps.push_back({distance, chunk, -1});
  }
  return plan;
}

}  // namespace

absl::Status CheckGatherSpec(const RingMember& me, const CollectiveSpec& spec,
                             size_t buffer_bytes) {
  const size_t n = static_cast<size_t>(std::max(1, me.world_size));
  return CheckChainSpec(me, spec, buffer_bytes, spec.count * n, CollectiveKind::kGather);
}

absl::Status RingGatherFromFirstSlot(const RingMember& me, Link& link, const CollectiveSpec& spec,
                                     absl::Span<std::byte> buffer, const RingOptions& options,
                                     RingStats* stats) {
  RingExchange exchange(me, link, spec, options);
  const absl::Status valid = CheckGatherSpec(me, spec, buffer.size());
  if (!valid.ok()) return exchange.Reject(valid);
  const int n = me.world_size;
  const int root = spec.root;
  if (n == 1) return absl::OkStatus();
  if (absl::Status agreed = exchange.AgreeBeforeTouching(stats); !agreed.ok()) return agreed;

  const size_t count = spec.count;
  const size_t slot_bytes = count * DTypeSize(spec.dtype);
  const int distance = RingMod(me.rank - root, n);
  // Every rank's own block takes its place in rank order (frames name where their bytes
  // lie, the same on every rank); the blocks it receives arrive into theirs.
  if (me.rank > 0 && slot_bytes > 0) {
    std::memmove(buffer.data() + slot_bytes * static_cast<size_t>(me.rank), buffer.data(),
                 slot_bytes);
  }
  PipelinePlan plan = ChainPlan(distance, n);
  plan.chunk_range = [count, root, n](int chunk) {
    return ElementRange{static_cast<size_t>(RingMod(root + chunk, n)) * count, count};
  };
  RingOptions chain = options;
  chain.segment_bytes = ChainSegmentBytes(slot_bytes, kMinChainPieces,
                                          exchange.min_segment_bytes(), options.segment_bytes);
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, chain, stats);
}

}  // namespace ringsync
