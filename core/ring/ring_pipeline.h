// The machinery every ring collective shares: a rank's part in a collective is a list
// of steps, each sending one chunk to the right neighbour and/or receiving one from the
// left; RunRingPipeline runs that list with the pipeline and failure rules below, and
// each collective (all-reduce, all-gather, broadcast) only says which chunks move and
// what to do with a received segment.
//
// Pipeline. Chunks travel as segments. The calling thread receives and handles
// segments in order, and posts segment j of step i to the SendQueue as soon as its data
// is in: when step i-1 received the same chunk, once segment j of it arrived (the
// segment flows straight through this rank); when step i-1 received another chunk, once
// all of it arrived. The queue sends in post order, from the link's own threads where
// the link posts sends (send_queue.h), else from a thread of its own. Back-pressure is
// the link's: bounded queues, or the segments of one collective.
//
// In place. Before a segment is received into a chunk that this rank sent at an
// earlier step, the rank waits until that send is complete, so no byte the link may
// still read is overwritten.
//
// Failure. Whichever side fails first records the cause and cancels the other; once no
// segment is going out any more, the rank tells the ring with an abort frame
// (RingExchange) and returns the cause. A cancellation from outside
// (RingOptions::cancellation) is reported with its reason.
//
// Outcome. When this rank's data is complete it runs the commit pass (RingExchange::
// Commit) and returns OK only once it learned that every rank's data is complete too.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ring/partition.h"
#include "core/ring/ring_exchange.h"

namespace ringsync {

struct PipelineStep {
  int wire_step = 0;     // the step number frames carry; sender and receiver agree on it
  int send_chunk = -1;   // -1: nothing to send at this step
  int recv_chunk = -1;   // -1: nothing to receive
};

struct PipelinePlan {
  std::vector<PipelineStep> steps;
  // Where chunk c lives in the buffer, in elements.
  std::function<ElementRange(int chunk)> chunk_range;
  size_t segment_elements = 1;
  // Handles a received segment: `dst` is the segment's place in the buffer; `payload`
  // (of dst.size() bytes) may come in pieces, read in place (core/link/payload.h).
  std::function<absl::Status(const PipelineStep& step, absl::Span<std::byte> dst,
                             const Payload& payload, size_t elements)>
      on_receive;
  // Optional: waits until the bytes of a segment sent as they lie in the buffer (at a step
  // after which nothing was received: the caller's own input) have arrived, before the
  // segment is posted (input_arrival.h).
  std::function<absl::Status(const ElementRange& segment)> await_sent_input;
};

// Elements per segment for RingOptions::segment_bytes (at least one).
size_t SegmentElements(const RingOptions& options, DType dtype);

// InvalidArgument unless `me` is a sane ring position and the buffer holds exactly
// `elements` elements of spec.dtype.
absl::Status CheckBufferSize(const RingMember& me, const CollectiveSpec& spec, size_t buffer_bytes,
                             size_t elements);

// Copies a received segment into place (all-gather and broadcast receive this way).
absl::Status CopySegment(absl::Span<std::byte> dst, const Payload& payload);

// Runs this rank's part of the collective whose exchange is `exchange`, then its commit
// pass (RingExchange::Commit): OK only once every rank holds its complete result. On
// failure the ring has been told and the status names this rank and the collective; a
// failure after this rank's data completed is marked OutcomeMark::kInDoubt.
absl::Status RunRingPipeline(const PipelinePlan& plan, RingExchange& exchange,
                             absl::Span<std::byte> buffer, size_t element_size);

// For collectives that only move data (all-gather, broadcast): fills in the segment
// size and a receiver that copies each segment into place, runs the plan, and reports
// the exchange's counters into `stats` (if not null).
absl::Status RunCopyingPipeline(PipelinePlan plan, RingExchange& exchange,
                                const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                                const RingOptions& options, RingStats* stats);

}  // namespace ringsync
