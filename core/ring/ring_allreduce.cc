#include "core/ring/ring_allreduce.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/ring/input_arrival.h"
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

absl::Status CheckReduceScatterArguments(const RingMember& me, const CollectiveSpec& spec,
                                         absl::Span<std::byte> buffer, const ReduceSpec& rspec) {
  if (spec.kind != CollectiveKind::kReduceScatter) {
    return absl::InvalidArgumentError(
        absl::StrCat("a reduce-scatter cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (absl::Status s = ValidateReduceSpec(rspec); !s.ok()) return s;
  if (absl::Status s = CheckBufferSize(me, spec, buffer.size(), spec.count); !s.ok()) return s;
  if (me.world_size > 0 && spec.count % static_cast<uint64_t>(me.world_size) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a reduce-scatter's input is one block per rank: ", spec.count,
        " elements are not a multiple of this ring's ", me.world_size, " ranks"));
  }
  return absl::OkStatus();
}

namespace {

// The all-reduce as pipeline steps: schedule.h's chunks, combining during
// reduce-scatter (finalizing the owned chunk at its last step), copying during
// all-gather. Input still arriving is awaited where it is first read: the chunk sent at
// step 0 segment by segment as it is posted, every other chunk as a segment is combined
// into it; so every chunk has arrived before the all-gather overwrites it.
// Only the first `steps` of the schedule's steps run (a reduce-scatter's).
PipelinePlan AllReducePlan(const RingMember& me, const CollectiveSpec& spec,
                           const RingOptions& options, Reducer& reducer, const ReduceSpec& rspec,
                           RingExchange& exchange, absl::Span<std::byte> buffer,
                           RingStats& stats, int steps) {
  PipelinePlan plan;
  const int n = me.world_size;
  for (int t = 0; t < steps; ++t) {
    const RingStep step = AllReduceStep(me.rank, n, t);
    plan.steps.push_back({t, step.send_chunk, step.recv_chunk});
  }
  const size_t count = spec.count;
  plan.chunk_range = [count, n](int c) { return ChunkRange(count, n, c); };
  plan.segment_elements = SegmentElements(options, spec.dtype);
  const int last_reduce_step = n - 2;
  const size_t esize = DTypeSize(spec.dtype);
  const InputArrival* arrival = options.input_arrival;
  if (arrival != nullptr) {
    plan.await_sent_input = [arrival, &exchange, esize](const ElementRange& segment) {
      return arrival->AwaitBytes(segment.offset * esize, segment.count * esize, exchange.limit());
    };
  }
  plan.on_receive = [&reducer, rspec, &stats, last_reduce_step, esize, arrival, &exchange,
                     base = buffer.data()](const PipelineStep& step, absl::Span<std::byte> dst,
                                           const Payload& payload,
                                           size_t elements) -> absl::Status {
    if (step.wire_step > last_reduce_step) return CopySegment(dst, payload);
    if (arrival != nullptr) {
      if (absl::Status s = arrival->AwaitBytes(dst.data() - base, dst.size(), exchange.limit());
          !s.ok()) {
        return s;
      }
    }
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

// The all-reduce's first `steps` steps (all of them, or a reduce-scatter's), once
// `checked` (the caller's checks of its arguments) is OK; else the ring is told.
absl::Status RunAllReduceSteps(const RingMember& me, Link& link, Reducer& reducer,
                               const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                               const RingOptions& given_options, RingStats* stats, int steps,
                               const absl::Status& checked) {
  // Input still arriving is awaited through a stopwatch (RingStats::input_wait).
  std::optional<TimedInputArrival> timed_arrival;
  RingOptions options = given_options;
  if (given_options.input_arrival != nullptr) {
    options.input_arrival = &timed_arrival.emplace(*given_options.input_arrival);
  }
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  RingExchange exchange(me, link, spec, options);
  if (!checked.ok()) return exchange.Reject(checked);
  RingStats local;
  if (absl::Status agreed = exchange.AgreeBeforeTouching(stats); !agreed.ok()) return agreed;
  // Scaling first (and a ring of one) reads the whole input at once.
  const InputArrival* arrival = options.input_arrival;
  absl::Status result = arrival != nullptr && (spec.pre_scale != 1.0 || me.world_size == 1)
                            ? arrival->AwaitBytes(0, buffer.size(), exchange.limit())
                            : absl::OkStatus();
  ReduceStats pre;
  if (result.ok()) result = reducer.PreScale(rspec, buffer.data(), spec.count, &pre);
  local.overflows += pre.overflows;
  if (result.ok() && me.world_size == 1) {
    ReduceStats fin;
    result = reducer.Finalize(rspec, buffer.data(), spec.count, &fin);
    local.overflows += fin.overflows;
    result = exchange.Annotate(result);
  } else if (result.ok()) {
    const PipelinePlan plan =
        AllReducePlan(me, spec, options, reducer, rspec, exchange, buffer, local, steps);
    result = RunRingPipeline(plan, exchange, buffer, DTypeSize(spec.dtype));
  } else {
    result = exchange.Reject(result);
  }
  exchange.ExportStats(&local);
  if (timed_arrival.has_value()) local.input_wait = timed_arrival->waited();
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace

absl::Status RingAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                           const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                           const RingOptions& options, RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  return RunAllReduceSteps(me, link, reducer, spec, buffer, options, stats,
                           AllReduceSteps(me.world_size),
                           CheckAllReduceArguments(me, spec, buffer, rspec));
}

absl::Status RingReduceScatter(const RingMember& me, Link& link, Reducer& reducer,
                               const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                               const RingOptions& options, RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  const absl::Status checked = CheckReduceScatterArguments(me, spec, buffer, rspec);
  // The all-reduce's N-1 reduce-scatter steps leave rank r holding chunk r, combined in
  // the all-reduce's order (schedule.h).
  return RunAllReduceSteps(me, link, reducer, spec, buffer, options, stats,
                           me.world_size - 1, checked);
}

}  // namespace ringsync
