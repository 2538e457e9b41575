#include "core/ring/ring_allgather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {

absl::Status RingAllGather(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats) {
  RingExchange exchange(me, link, spec, options);
  absl::Status valid = CheckBufferSize(me, spec, buffer.size(),
                                       spec.count * static_cast<size_t>(std::max(1, me.world_size)));
  if (valid.ok() && spec.kind != CollectiveKind::kAllGather) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("RingAllGather cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (!valid.ok()) return exchange.Reject(valid);
  if (me.world_size == 1) return absl::OkStatus();

  PipelinePlan plan;
  const int n = me.world_size;
  for (int s = 0; s + 1 < n; ++s) {
    plan.steps.push_back({s, RingMod(me.rank - s, n), RingMod(me.rank - s - 1, n)});
  }
  const size_t count = spec.count;
  plan.chunk_range = [count](int c) { return ElementRange{static_cast<size_t>(c) * count, count}; };
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, options, stats);
}

absl::Status RingAllGatherFromFirstSlot(const RingMember& me, Link& link,
                                        const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                                        const RingOptions& options, RingStats* stats) {
  const size_t slot = spec.count * (IsValid(spec.dtype) ? DTypeSize(spec.dtype) : 0);
  const size_t rank = static_cast<size_t>(std::max(0, me.rank));
  // A buffer of the wrong size is RingAllGather's to refuse, on every rank alike.
  if (slot > 0 && rank > 0 && buffer.size() == slot * static_cast<size_t>(me.world_size)) {
    std::memmove(buffer.data() + slot * rank, buffer.data(), slot);
  }
  return RingAllGather(me, link, spec, buffer, options, stats);
}

}  // namespace ringsync
