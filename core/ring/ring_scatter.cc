#include "core/ring/ring_scatter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ring/ring_broadcast.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {
namespace {

// Chunk d (1..N-1) is the block of the rank d hops from the root; chunk N is the last
// rank's empty "done" notice to the root. Every frame a rank sends carries its own
// distance from the root as its step. The farthest block leaves first: every hop of the
// chain is busy from the start, and the last block out has one hop to go, not N-1.
PipelinePlan ChainPlan(int distance, int n) {
  const int done = n;
  PipelinePlan plan;
  if (distance == 0) {
    for (int chunk = n - 1; chunk >= 1; --chunk) plan.steps.push_back({0, chunk, -1});
    plan.steps.push_back({n - 1, -1, done});
    return plan;
  }
  // Each later block received and forwarded as it arrives (a send right after the receive
  // of its chunk flows segment by segment), then its own.
  for (int chunk = n - 1; chunk > distance; --chunk) {
    plan.steps.push_back({distance - 1, -1, chunk});
    plan.steps.push_back({distance, chunk, -1});
  }
  plan.steps.push_back({distance - 1, -1, distance});
  if (distance == n - 1) plan.steps.push_back({distance, done, -1});
  return plan;
}

}  // namespace

absl::Status CheckScatterSpec(const RingMember& me, const CollectiveSpec& spec,
                              size_t buffer_bytes) {
  const size_t n = static_cast<size_t>(std::max(1, me.world_size));
  absl::Status valid = CheckChainSpec(me, spec, buffer_bytes, spec.count, CollectiveKind::kScatter);
  if (valid.ok() && spec.count % n != 0) {
    valid = absl::InvalidArgumentError(absl::StrCat(
        "scatter of ", spec.count, " elements: not one block for each of ", n, " ranks"));
  }
  return valid;
}

absl::Status RingScatter(const RingMember& me, Link& link, const CollectiveSpec& spec,
                         absl::Span<std::byte> buffer, const RingOptions& options,
                         RingStats* stats) {
  RingExchange exchange(me, link, spec, options);
  const absl::Status valid = CheckScatterSpec(me, spec, buffer.size());
  if (!valid.ok()) return exchange.Reject(valid);
  const int n = me.world_size;
  if (n == 1) return absl::OkStatus();
  if (absl::Status agreed = exchange.AgreeBeforeTouching(stats); !agreed.ok()) return agreed;

  PipelinePlan plan = ChainPlan(RingMod(me.rank - spec.root, n), n);
  const size_t block = spec.count / static_cast<size_t>(n);
  const int root = spec.root;
  plan.chunk_range = [block, root, n](int chunk) {
    if (chunk >= n) return ElementRange{};
    return ElementRange{static_cast<size_t>(RingMod(root + chunk, n)) * block, block};
  };
  RingOptions chain = options;
  chain.segment_bytes = ChainSegmentBytes(buffer.size() / n, kMinChainPieces,
                                          exchange.min_segment_bytes(), options.segment_bytes);
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, chain, stats);
}

}  // namespace ringsync
