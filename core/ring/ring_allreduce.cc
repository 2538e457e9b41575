#include "core/ring/ring_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ring/partition.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_pipeline.h"
#include "core/ring/schedule.h"
#include "core/sync/steady_stopwatch.h"

namespace ringsync {

absl::Status CheckAllReduceArguments(const RingMember& me, const CollectiveSpec& spec,
                                     absl::Span<std::byte> buffer, const ReduceSpec& rspec) {
  if (spec.kind != CollectiveKind::kAllReduce &&
      !(spec.kind == CollectiveKind::kBarrier && spec.count == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RingAllReduce cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (absl::Status s = ValidateReduceSpec(rspec); !s.ok()) return s;
  return CheckBufferSize(me, spec, buffer.size(), spec.count);
}

namespace {

// The all-reduce as pipeline steps: schedule.h's chunks, combining during
// reduce-scatter (finalizing the owned chunk at its last step), copying during
// all-gather.
PipelinePlan AllReducePlan(const RingMember& me, const CollectiveSpec& spec,
                           const RingOptions& options, Reducer& reducer, const ReduceSpec& rspec,
                           RingStats& stats) {
  PipelinePlan plan;
  const int n = me.world_size;
  for (int t = 0; t < AllReduceSteps(n); ++t) {
    const RingStep step = AllReduceStep(me.rank, n, t);
    plan.steps.push_back({t, step.send_chunk, step.recv_chunk});
  }
  const size_t count = spec.count;
  plan.chunk_range = [count, n](int c) { return ChunkRange(count, n, c); };
  plan.segment_elements = SegmentElements(options, spec.dtype);
  const int last_reduce_step = n - 2;
  const size_t esize = DTypeSize(spec.dtype);
  plan.on_receive = [&reducer, rspec, &stats, last_reduce_step, esize](
                        const PipelineStep& step, absl::Span<std::byte> dst,
                        const Payload& payload, size_t elements) -> absl::Status {
    if (step.wire_step > last_reduce_step) return CopySegment(dst, payload);
    ReduceStats rstats;
    const SteadyStopwatch reducing;
    // Straight from the received pieces: combining is element-wise, so the bits do not
    // depend on where the pieces are cut.
    absl::Status s = payload.ForEachElementRun(
        esize, [&](size_t offset, absl::Span<const std::byte> run) {
          return reducer.Combine(rspec, dst.data() + offset, run.data(), run.size() / esize,
                                 &rstats);
        });
    if (s.ok() && step.wire_step == last_reduce_step) {
      s = reducer.Finalize(rspec, dst.data(), elements, &rstats);
    }
    stats.reduce_time += reducing.Elapsed();
    stats.overflows += rstats.overflows;
    return s;
  };
  return plan;
}

}  // namespace

absl::Status RingAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                           const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                           const RingOptions& options, RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  RingExchange exchange(me, link, spec, options);
  if (absl::Status s = CheckAllReduceArguments(me, spec, buffer, rspec); !s.ok()) {
    return exchange.Reject(s);
  }
  RingStats local;
  if (absl::Status agreed = exchange.Agree(); !agreed.ok()) {
    exchange.ExportStats(stats);
    if (stats != nullptr) stats->buffer_untouched = true;
    return agreed;
  }
  ReduceStats pre;
  absl::Status result = reducer.PreScale(rspec, buffer.data(), spec.count, &pre);
  local.overflows += pre.overflows;
  if (result.ok() && me.world_size == 1) {
    ReduceStats fin;
    result = reducer.Finalize(rspec, buffer.data(), spec.count, &fin);
    local.overflows += fin.overflows;
    result = exchange.Annotate(result);
  } else if (result.ok()) {
    const PipelinePlan plan = AllReducePlan(me, spec, options, reducer, rspec, local);
    result = RunRingPipeline(plan, exchange, buffer, DTypeSize(spec.dtype));
  } else {
    result = exchange.Reject(result);
  }
  exchange.ExportStats(&local);
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
