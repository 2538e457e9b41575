#include "core/ring/ring_allgather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"

namespace ringsync {

namespace {

// `input_first`: this rank's contribution sits in the first slot until agreement, and
// moves to its own slot only then, so a failed agreement leaves the buffer as it was.
absl::Status AllGather(const RingMember& me, Link& link, const CollectiveSpec& spec,
                       absl::Span<std::byte> buffer, const RingOptions& options, RingStats* stats,
                       bool input_first) {
  RingExchange exchange(me, link, spec, options);
  absl::Status valid = CheckBufferSize(me, spec, buffer.size(),
                                       spec.count * static_cast<size_t>(std::max(1, me.world_size)));
  if (valid.ok() && spec.kind != CollectiveKind::kAllGather) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("RingAllGather cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (!valid.ok()) return exchange.Reject(valid);
  if (me.world_size == 1) return absl::OkStatus();
  if (absl::Status agreed = exchange.AgreeBeforeTouching(stats); !agreed.ok()) return agreed;
  const size_t slot = spec.count * DTypeSize(spec.dtype);
  if (input_first && me.rank > 0 && slot > 0) {
    std::memmove(buffer.data() + slot * static_cast<size_t>(me.rank), buffer.data(), slot);
  }

  PipelinePlan plan;
  const int n = me.world_size;
  for (int s = 0; s + 1 < n; ++s) {
    plan.steps.push_back({s, RingMod(me.rank - s, n), RingMod(me.rank - s - 1, n)});
  }
  const size_t count = spec.count;
  plan.chunk_range = [count](int c) { return ElementRange{static_cast<size_t>(c) * count, count}; };
  return RunCopyingPipeline(std::move(plan), exchange, spec, buffer, options, stats);
}

}  // namespace

absl::Status RingAllGather(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           absl::Span<std::byte> buffer, const RingOptions& options,
                           RingStats* stats) {
  return AllGather(me, link, spec, buffer, options, stats, /*input_first=*/false);
}

absl::Status RingAllGatherFromFirstSlot(const RingMember& me, Link& link,
                                        const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                                        const RingOptions& options, RingStats* stats) {
  return AllGather(me, link, spec, buffer, options, stats, /*input_first=*/true);
}

}  // namespace ringsync
