#include "core/ring/ring_pipeline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/ring/pipeline_progress.h"

namespace ringsync {
namespace {

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

absl::Status SendAll(const PipelinePlan& plan, const PlanShape& shape, RingExchange& exchange,
                     PipelineProgress& progress, absl::Span<std::byte> buffer, size_t esize) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PipelineStep& step = plan.steps[i];
    if (step.send_chunk < 0) continue;
    const PipelineStep* before = i > 0 ? &plan.steps[i - 1] : nullptr;
    const bool has_input = before != nullptr && before->recv_chunk >= 0;
    const bool flows_through = has_input && before->recv_chunk == step.send_chunk;
    for (size_t j = 0; j < shape.segments(step.send_chunk); ++j) {
      if (has_input) {
        const size_t needed = flows_through ? j + 1 : shape.segments(before->recv_chunk);
        if (absl::Status s = progress.AwaitReceived(static_cast<int>(i - 1), needed, exchange.limit());
            !s.ok()) {
          return s;
        }
      }
      const ElementRange range = shape.segment(step.send_chunk, j);
      if (absl::Status s = exchange.SendSegment(step.wire_step, static_cast<int>(j),
                                                step.send_chunk, range, Bytes(buffer, range, esize));
          !s.ok()) {
        return s;
      }
      progress.MarkSent();
    }
  }
  return absl::OkStatus();
}

absl::Status ReceiveAll(const PipelinePlan& plan, const PlanShape& shape, RingExchange& exchange,
                        PipelineProgress& progress, absl::Span<std::byte> buffer, size_t esize) {
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
      progress.MarkReceived(static_cast<int>(i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// How often a rank whose sender is still busy looks for a late abort frame.
constexpr absl::Duration kAbortWatchSlice = absl::Milliseconds(20);

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
  PipelineProgress progress(static_cast<int>(plan.steps.size()));
  {
    auto fail = [&](const absl::Status& s) {
      if (s.ok()) return;
      progress.Fail(s);
      exchange.Cancel(s);
    };
    std::jthread sender([&] {
      fail(SendAll(plan, shape, exchange, progress, buffer, element_size));
      progress.MarkSenderDone();
    });
    absl::Status received = ReceiveAll(plan, shape, exchange, progress, buffer, element_size);
    // Everything is in, but the sender may still be blocked on a neighbour that gave up:
    // listen for its abort, which would otherwise arrive after this rank stopped reading.
    while (received.ok() && !progress.AwaitSenderDone(kAbortWatchSlice)) {
      received = exchange.WatchForAbort(absl::ZeroDuration());
    }
    fail(received);
  }  // joins the sender
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
