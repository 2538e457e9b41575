#include "core/ring/ring_broadcast.h"

#include "absl/strings/str_cat.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {
namespace {

constexpr int kData = 0;  // the buffer is one chunk
constexpr int kDone = 1;  // an empty chunk: the last rank's "everyone has it" notice

}  // namespace

absl::Status RingBroadcast(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats) {
  RingExchange exchange(me, link, spec, options);
  absl::Status valid = CheckBufferSize(me, spec, buffer.size(), spec.count);
  if (valid.ok() && spec.kind != CollectiveKind::kBroadcast) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("RingBroadcast cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (valid.ok() && (spec.root < 0 || spec.root >= me.world_size)) {
    valid = absl::InvalidArgumentError(absl::StrCat("broadcast root ", spec.root,
                                                    " is outside a ring of ", me.world_size));
  }
  if (!valid.ok()) return exchange.Reject(valid);
  const int n = me.world_size;
  if (n == 1) return absl::OkStatus();
  if (absl::Status agreed = exchange.Agree(); !agreed.ok()) {
    exchange.ExportStats(stats);
    if (stats != nullptr) stats->buffer_untouched = true;
    return agreed;
  }

  // Hops from the root: the root is 0, the last rank of the chain n-1.
  const int distance = RingMod(me.rank - spec.root, n);
  PipelinePlan plan;
  if (distance == 0) {
    plan.steps = {{0, kData, -1}, {n - 1, -1, kDone}};
  } else if (distance < n - 1) {
    plan.steps = {{distance - 1, -1, kData}, {distance, kData, -1}};
  } else {
    plan.steps = {{distance - 1, -1, kData}, {distance, kDone, -1}};
  }
  const size_t count = spec.count;
  plan.chunk_range = [count](int c) { return c == kData ? ElementRange{0, count} : ElementRange{}; };
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, options, stats);
}

}  // namespace ringsync
