#include "core/ring/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/partition.h"
#include "core/ring/pipeline_progress.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/schedule.h"

namespace ringsync {
namespace {

// The static shape of one rank's all-reduce: which chunk each step moves and how it
// is cut into segments. Derived once; both threads read it.
class AllReducePlan {
 public:
  AllReducePlan(const RingMember& me, const CollectiveSpec& spec, size_t segment_bytes)
      : me_(me),
        count_(spec.count),
        segment_elements_(std::max<size_t>(1, segment_bytes / DTypeSize(spec.dtype))),
        steps_(AllReduceSteps(me.world_size)) {
    size_t sends = 0;
    for (int t = 0; t < steps_; ++t) {
      first_send_of_step_.push_back(sends);
      sends += segments(send_chunk(t));
    }
  }

  int steps() const { return steps_; }
  RingStep step(int t) const { return AllReduceStep(me_.rank, me_.world_size, t); }
  int send_chunk(int t) const { return step(t).send_chunk; }
  int recv_chunk(int t) const { return step(t).recv_chunk; }
  ElementRange chunk(int c) const { return ChunkRange(count_, me_.world_size, c); }
  size_t segments(int c) const { return SegmentCount(chunk(c).count, segment_elements_); }
  ElementRange segment(int c, size_t j) const {
    return SegmentRange(chunk(c), segment_elements_, j);
  }
  // Frames this rank has sent once segment j of step t is out.
  size_t sends_through(int t, size_t j) const { return first_send_of_step_[t] + j + 1; }

 private:
  const RingMember me_;
  const size_t count_;
  const size_t segment_elements_;
  const int steps_;
  std::vector<size_t> first_send_of_step_;
};

absl::Span<std::byte> Bytes(absl::Span<std::byte> buffer, const ElementRange& r, size_t esize) {
  return buffer.subspan(r.offset * esize, r.count * esize);
}

// The sender thread's loop: segment j of step t leaves once segment j of step t-1 is in.
absl::Status SendAll(const AllReducePlan& plan, RingExchange& exchange, PipelineProgress& progress,
                     absl::Span<std::byte> buffer, size_t esize) {
  for (int t = 0; t < plan.steps(); ++t) {
    const int c = plan.send_chunk(t);
    for (size_t j = 0; j < plan.segments(c); ++j) {
      if (t > 0) {
        if (absl::Status s = progress.AwaitReceived(t - 1, j + 1, exchange.limit()); !s.ok()) {
          return s;
        }
      }
      const ElementRange range = plan.segment(c, j);
      if (absl::Status s = exchange.SendSegment(t, static_cast<int>(j), c, range,
                                                Bytes(buffer, range, esize));
          !s.ok()) {
        return s;
      }
      progress.MarkSent();
    }
  }
  return absl::OkStatus();
}

// The receiving side: combine during reduce-scatter (finalizing the owned chunk at its
// last step), overwrite during all-gather.
absl::Status RunReceiver(const AllReducePlan& plan, const RingMember& me, RingExchange& exchange,
                         PipelineProgress& progress, Reducer& reducer, const ReduceSpec& rspec,
                         absl::Span<std::byte> buffer, size_t esize, RingStats& stats) {
  const int last_reduce_step = me.world_size - 2;
  for (int t = 0; t < plan.steps(); ++t) {
    const int c = plan.recv_chunk(t);
    const bool reducing = t <= last_reduce_step;
    for (size_t j = 0; j < plan.segments(c); ++j) {
      if (!reducing) {
        // All-gather overwrites chunk c, which this rank sent at reduce-scatter step
        // t - (N-1): that send must be complete before the bytes change.
        const int earlier = t - (me.world_size - 1);
        if (absl::Status s = progress.AwaitSent(plan.sends_through(earlier, j), exchange.limit());
            !s.ok()) {
          return s;
        }
      }
      const ElementRange range = plan.segment(c, j);
      absl::StatusOr<ReceivedFrame> frame =
          exchange.ReceiveSegment(t, static_cast<int>(j), c, range);
      if (!frame.ok()) return frame.status();
      absl::Span<std::byte> dst = Bytes(buffer, range, esize);
      if (reducing) {
        ReduceStats rstats;
        const absl::Time start = absl::Now();
        absl::Status s =
            reducer.Combine(rspec, dst.data(), frame->payload.data(), range.count, &rstats);
        if (s.ok() && t == last_reduce_step) {
          s = reducer.Finalize(rspec, dst.data(), range.count, &rstats);
        }
        stats.reduce_time += absl::Now() - start;
        stats.overflows += rstats.overflows;
        if (!s.ok()) return s;
      } else if (!dst.empty()) {
        std::memcpy(dst.data(), frame->payload.data(), dst.size());
      }
      progress.MarkReceived(t);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckArguments(const RingMember& me, const CollectiveSpec& spec,
                            absl::Span<std::byte> buffer, const ReduceSpec& rspec) {
  if (me.world_size < 1 || me.rank < 0 || me.rank >= me.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", me.rank, " is outside a ring of ", me.world_size));
  }
  if (spec.kind != CollectiveKind::kAllReduce) {
    return absl::InvalidArgumentError(
        absl::StrCat("RingAllReduce cannot run a ", CollectiveKindName(spec.kind)));
  }
  if (absl::Status s = ValidateReduceSpec(rspec); !s.ok()) return s;
  if (buffer.size() != spec.count * DTypeSize(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("buffer holds ", buffer.size(), " bytes but ",
                                                   spec.count, " x ", DTypeName(spec.dtype),
                                                   " needs ", spec.count * DTypeSize(spec.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                           const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                           const RingOptions& options, RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  RingExchange exchange(me, link, spec, options);
  if (absl::Status s = CheckArguments(me, spec, buffer, rspec); !s.ok()) {
    // Peers must not wait for a rank that will never send: tell them, if the ring is sane.
    if (me.world_size >= 2 && me.rank >= 0 && me.rank < me.world_size) exchange.NotifyAbort(s);
    return exchange.Annotate(s);
  }
  const size_t esize = DTypeSize(spec.dtype);
  RingStats local;

  ReduceStats pre;
  if (absl::Status s = reducer.PreScale(rspec, buffer.data(), spec.count, &pre); !s.ok()) {
    return exchange.Annotate(s);
  }
  local.overflows += pre.overflows;
  if (me.world_size == 1) {
    ReduceStats fin;
    absl::Status s = reducer.Finalize(rspec, buffer.data(), spec.count, &fin);
    local.overflows += fin.overflows;
    if (stats != nullptr) *stats = local;
    return exchange.Annotate(s);
  }

  const AllReducePlan plan(me, spec, options.segment_bytes);
  PipelineProgress progress(plan.steps());
  {
    // Whichever side fails first records the cause and cancels the other.
    auto fail = [&](const absl::Status& s) {
      if (s.ok()) return;
      progress.Fail(s);
      exchange.Cancel();
    };
    std::jthread sender([&] { fail(SendAll(plan, exchange, progress, buffer, esize)); });
    fail(RunReceiver(plan, me, exchange, progress, reducer, rspec, buffer, esize, local));
  }  // joins the sender
  const absl::Status result = progress.failure();
  if (!result.ok()) exchange.NotifyAbort(result);

  local.bytes_sent = exchange.stats().bytes_sent;
  local.bytes_received = exchange.stats().bytes_received;
  local.frames_sent = exchange.stats().frames_sent;
  if (stats != nullptr) *stats = local;
  return exchange.Annotate(result);
}

}  // namespace ringsync
