#include "core/ring/ring_pipeline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/ring/pipeline_progress.h"
#include "core/ring/send_queue.h"

namespace ringsync {
namespace {

// How often a rank whose last segments are still going out looks for a late abort frame.
constexpr absl::Duration kAbortWatchSlice = absl::Milliseconds(20);
// How long segments still going out after a failure may take before they are given up.
constexpr absl::Duration kAbandonGrace = absl::Seconds(2);

// The plan's derived shape: segment ranges and how many sends precede each step.
class PlanShape {
 public:
  explicit PlanShape(const PipelinePlan& plan) : plan_(plan) {
    size_t sends = 0;
    std::map<int, size_t> last_send_step;  // chunk -> index of the latest step sending it
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const PipelineStep& step = plan.steps[i];
      first_send_.push_back(sends);
      std::optional<size_t> earlier;
      if (step.recv_chunk >= 0) {
        if (auto it = last_send_step.find(step.recv_chunk); it != last_send_step.end()) {
          earlier = it->second;
        }
      }
      overwrites_send_of_step_.push_back(earlier);
      if (step.send_chunk >= 0) {
        sends += segments(step.send_chunk);
        last_send_step[step.send_chunk] = i;
      }
    }
  }

  size_t segments(int chunk) const {
    return SegmentCount(plan_.chunk_range(chunk).count, plan_.segment_elements);
  }
  ElementRange segment(int chunk, size_t j) const {
    return SegmentRange(plan_.chunk_range(chunk), plan_.segment_elements, j);
  }
  // Frames sent once segment j of step i is out.
  size_t sends_through(size_t i, size_t j) const { return first_send_[i] + j + 1; }
  // The earlier step whose send of this step's receive chunk must complete first.
  std::optional<size_t> overwrites_send_of_step(size_t i) const {
    return overwrites_send_of_step_[i];
  }

 private:
  const PipelinePlan& plan_;
  std::vector<size_t> first_send_;
  std::vector<std::optional<size_t>> overwrites_send_of_step_;
};

absl::Span<std::byte> Bytes(absl::Span<std::byte> buffer, const ElementRange& r, size_t esize) {
  return buffer.subspan(r.offset * esize, r.count * esize);
}

// Posts, in the plan's order, every next segment whose data is in: segment j of step i
// once step i-1 received segment j of the same chunk (it flows straight through), or
// all of another chunk; at once when step i-1 received nothing.
class SendCursor {
 public:
  SendCursor(const PipelinePlan& plan, const PlanShape& shape, absl::Span<std::byte> buffer,
             size_t esize)
      : plan_(plan), shape_(shape), buffer_(buffer), esize_(esize) {}

  // `received[i]`: segments step i has received so far. Fails only when the plan's
  // await_sent_input does.
  absl::Status PostReady(const std::vector<size_t>& received, SendQueue& sends) {
    while (step_ < plan_.steps.size()) {
      const PipelineStep& step = plan_.steps[step_];
      if (step.send_chunk < 0 || segment_ >= shape_.segments(step.send_chunk)) {
        ++step_;
        segment_ = 0;
        continue;
      }
      const PipelineStep* before = step_ > 0 ? &plan_.steps[step_ - 1] : nullptr;
      if (before != nullptr && before->recv_chunk >= 0) {
        const size_t needed = before->recv_chunk == step.send_chunk
                                  ? segment_ + 1
                                  : shape_.segments(before->recv_chunk);
        if (received[step_ - 1] < needed) return absl::OkStatus();
      }
      const ElementRange range = shape_.segment(step.send_chunk, segment_);
      if ((before == nullptr || before->recv_chunk < 0) && plan_.await_sent_input) {
        if (absl::Status s = plan_.await_sent_input(range); !s.ok()) return s;
      }
      sends.Post({step.wire_step, static_cast<int>(segment_), step.send_chunk, range,
                  Bytes(buffer_, range, esize_)});
      ++segment_;
    }
    return absl::OkStatus();
  }

 private:
  const PipelinePlan& plan_;
  const PlanShape& shape_;
  const absl::Span<std::byte> buffer_;
  const size_t esize_;
  size_t step_ = 0;
  size_t segment_ = 0;
};

// Receives and handles every segment in order, posting each send once its data is in.
absl::Status ReceiveAll(const PipelinePlan& plan, const PlanShape& shape, RingExchange& exchange,
                        PipelineProgress& progress, SendQueue& sends, absl::Span<std::byte> buffer,
                        size_t esize) {
  SendCursor cursor(plan, shape, buffer, esize);
  std::vector<size_t> received(plan.steps.size(), 0);
  if (absl::Status s = cursor.PostReady(received, sends); !s.ok()) return s;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PipelineStep& step = plan.steps[i];
    if (step.recv_chunk < 0) continue;
    for (size_t j = 0; j < shape.segments(step.recv_chunk); ++j) {
      if (std::optional<size_t> earlier = shape.overwrites_send_of_step(i)) {
        if (absl::Status s = progress.AwaitSent(shape.sends_through(*earlier, j), exchange.limit());
            !s.ok()) {
          return s;
        }
      }
      const ElementRange range = shape.segment(step.recv_chunk, j);
      absl::StatusOr<ReceivedFrame> frame =
          exchange.ReceiveSegment(step.wire_step, static_cast<int>(j), step.recv_chunk, range);
      if (!frame.ok()) return frame.status();
      if (absl::Status s = plan.on_receive(step, Bytes(buffer, range, esize), frame->payload,
                                           range.count);
          !s.ok()) {
        return s;
      }
      ++received[i];
      if (absl::Status s = cursor.PostReady(received, sends); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// For a rank that has received everything while segments are still going out: OK once
// they are all out; an abort that arrives meanwhile, the deadline or a cancellation ends
// the wait with its cause.
absl::Status AwaitLastSends(RingExchange& exchange, SendQueue& sends) {
  while (!sends.AwaitFinished(kAbortWatchSlice)) {
    // The abort of a neighbour that gave up would otherwise arrive after this rank
    // stopped reading.
    if (absl::Status s = exchange.WatchForAbort(absl::ZeroDuration()); !s.ok()) return s;
    const WaitLimit& limit = exchange.limit();
    if (limit.IsCancelled()) {
      return absl::CancelledError("cancelled while the last segments were going out");
    }
    if (limit.deadline.Passed()) {
      const int next = exchange.member().next();
      return absl::DeadlineExceededError(absl::StrCat(
          "sending to rank ", next, " timed out: rank ", next,
          " took no frame in time, so it is behind this rank (slow or stalled itself, or "
          "waiting for a rank behind it)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

size_t SegmentElements(const RingOptions& options, DType dtype) {
  return std::max<size_t>(1, options.segment_bytes / DTypeSize(dtype));
}

absl::Status CheckBufferSize(const RingMember& me, const CollectiveSpec& spec, size_t buffer_bytes,
                             size_t elements) {
  if (me.world_size < 1 || me.rank < 0 || me.rank >= me.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", me.rank, " is outside a ring of ", me.world_size));
  }
  if (!IsValid(spec.dtype)) return absl::InvalidArgumentError("invalid dtype");
  const size_t esize = DTypeSize(spec.dtype);
  if (elements > buffer_bytes / esize + 1 || buffer_bytes != elements * esize) {
    return absl::InvalidArgumentError(absl::StrCat("buffer holds ", buffer_bytes, " bytes but ",
                                                   elements, " x ", DTypeName(spec.dtype),
                                                   " needs ", elements * esize));
  }
  return absl::OkStatus();
}

absl::Status CopySegment(absl::Span<std::byte> dst, const Payload& payload) {
  payload.CopyTo(dst);
  return absl::OkStatus();
}

absl::Status RunRingPipeline(const PipelinePlan& plan, RingExchange& exchange,
                             absl::Span<std::byte> buffer, size_t element_size) {
  const PlanShape shape(plan);
  PipelineProgress progress;
  {
    SendQueue sends(exchange, progress);
    absl::Status result = ReceiveAll(plan, shape, exchange, progress, sends, buffer, element_size);
    if (result.ok()) result = AwaitLastSends(exchange, sends);
    if (!result.ok()) {
      progress.Fail(result);
      exchange.Cancel(result);
    }
    sends.Close(kAbandonGrace);
  }
  const absl::Status result = exchange.ExplainCancel(progress.failure());
  if (!result.ok()) {
    exchange.NotifyAbort(result);
    return exchange.Annotate(result);
  }
  // This rank holds its complete result; it is OK only once every rank does.
  return exchange.Commit();
}

absl::Status RunCopyingPipeline(PipelinePlan plan, RingExchange& exchange,
                                const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                                const RingOptions& options, RingStats* stats) {
  plan.segment_elements = SegmentElements(options, spec.dtype);
  plan.on_receive = [](const PipelineStep&, absl::Span<std::byte> dst, const Payload& payload,
                       size_t) {
    return CopySegment(dst, payload);
  };
  const absl::Status result = RunRingPipeline(plan, exchange, buffer, DTypeSize(spec.dtype));
  exchange.ExportStats(stats);
  return result;
}

}  // namespace ringsync
