#include "core/ring/stride_allreduce.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/ring/ring_allreduce.h"
#include "core/ring/ring_order_combine.h"
#include "core/ring/stride_rank.h"

namespace ringsync {

std::optional<StrideSchedule> StrideScheduleOf(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kDoubling: return StrideSchedule::kDoubling;
    case AllReduceAlgorithm::kDirect: return StrideSchedule::kDirect;
    case AllReduceAlgorithm::kRing:
    case AllReduceAlgorithm::kRelay: break;
  }
  return std::nullopt;
}

int StrideRounds(StrideSchedule schedule, int world_size) {
  return static_cast<int>(StrideRoundsOf(schedule, world_size).size());
}

std::optional<StrideSchedule> SmallestAllReduceSchedule(int world_size,
                                                        const AlgorithmPolicy& policy) {
  return StrideScheduleOf(ChooseAllReduceAlgorithm(world_size, sizeof(float), DType::kFloat32,
                                                   ReduceOp::kSum, policy));
}

std::vector<int> StridesBeyondTheRing(StrideSchedule schedule, int world_size) {
  std::vector<int> strides;
  for (const std::vector<StrideLane>& round : StrideRoundsOf(schedule, world_size)) {
    for (const StrideLane& lane : round) {
      if (lane.stride > 1) strides.push_back(lane.stride);
    }
  }
  return strides;
}

absl::Status StrideAllReduce(StrideSchedule schedule, const RingMember& me, StrideLinks& links,
                             Reducer& reducer, const CollectiveSpec& spec,
                             absl::Span<std::byte> buffer, const RingOptions& options,
                             RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  StrideRank rank(schedule, me, links, spec, options);
  const absl::Status checked = spec.kind == CollectiveKind::kReduceScatter
                                   ? CheckReduceScatterArguments(me, spec, buffer, rspec)
                                   : CheckAllReduceArguments(me, spec, buffer, rspec);
  if (!checked.ok()) return rank.Reject(checked);
  RingStats local;
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  ReduceStats pre;
  if (absl::Status s = reducer.PreScale(rspec, mine.data(), spec.count, &pre); !s.ok()) {
    return rank.Reject(s);
  }
  local.overflows += pre.overflows;

  std::vector<StrideContribution> held;
  const uint64_t bytes = buffer.size();
  absl::Status result = rank.Gather(std::move(mine), held, [bytes](int) { return bytes; });
  const bool combining = result.ok();  // the caller's buffer is written from here on
  if (combining) {
    std::vector<absl::Span<const std::byte>> contributions;
    contributions.reserve(held.size());
    for (const StrideContribution& c : held) contributions.emplace_back(c.bytes);
    result = CombineInRingOrder(me, reducer, rspec, spec.count, DTypeSize(spec.dtype),
                                contributions, buffer, local);
    if (!result.ok()) result = rank.Reject(result);
  }
  if (result.ok()) result = rank.Commit();
  rank.ExportStats(local);
  local.buffer_untouched = !result.ok() && !combining;
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
