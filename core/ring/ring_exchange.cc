#include "core/ring/ring_exchange.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringsync {

RingExchange::RingExchange(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           const RingOptions& options)
    : me_(me),
      link_(link),
      spec_(spec),
      options_(options),
      element_size_(DTypeSize(spec.dtype)),
      cancellation_(options.cancellation) {
  limit_.deadline = absl::Now() + options.timeout;
  limit_.cancellation = &cancellation_;
}

absl::Status RingExchange::SendSegment(int step, int segment, int chunk, const ElementRange& range,
                                       absl::Span<const std::byte> payload) {
  Frame frame;
  frame.kind = FrameKind::kSegment;
  frame.sender_rank = me_.rank;
  frame.generation = me_.generation;
  frame.sequence = spec_.sequence;
  frame.step = static_cast<uint32_t>(step);
  frame.segment = static_cast<uint32_t>(segment);
  frame.chunk = static_cast<uint32_t>(chunk);
  frame.offset = range.offset;
  frame.count = range.count;
  if (!spec_sent_) frame.spec = spec_;
  if (absl::Status s = link_.Send(frame, payload, limit_); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("sending step ", step, " segment ", segment,
                                               " to rank ", me_.next(), ": ", s.message()));
  }
  spec_sent_ = true;
  stats_.bytes_sent += payload.size();
  ++stats_.frames_sent;
  return absl::OkStatus();
}

absl::StatusOr<ReceivedFrame> RingExchange::ReceiveSegment(int step, int segment, int chunk,
                                                           const ElementRange& expected) {
  while (true) {
    absl::StatusOr<ReceivedFrame> received = link_.Receive(limit_);
    if (absl::IsDeadlineExceeded(received.status()) && frames_received_ > 0) {
      // The left neighbour was making progress, so it is more likely stuck behind the
      // rank that caused the stall than the cause: give its abort notice, which names
      // that rank, a moment to arrive.
      WaitLimit grace = limit_;
      grace.deadline = absl::Now() + options_.abort_notice_timeout;
      absl::StatusOr<ReceivedFrame> late = link_.Receive(grace);
      if (late.ok() && late->frame.kind == FrameKind::kAbort &&
          late->frame.sequence == spec_.sequence) {
        return TakeAbortFrame(late->frame);
      }
    }
    if (!received.ok()) {
      const absl::Status& s = received.status();
      return absl::Status(s.code(), absl::StrCat("waiting for step ", step, " segment ", segment,
                                                 " from rank ", me_.prev(), ": ", s.message()));
    }
    ++frames_received_;
    const Frame& frame = received->frame;
    if (frame.generation != me_.generation) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", me_.prev(), " sent a frame of generation ", frame.generation,
          " but this rank is in generation ", me_.generation, "; the ring changed under it"));
    }
    if (frame.sequence < spec_.sequence) {
      // Left over from a collective this rank already finished: skip. Anything else
      // means the neighbour is behind.
      if (frame.sequence <= link_.finished_sequence()) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "ranks called different collectives: rank ", me_.prev(), " is still at collective #",
          frame.sequence, frame.spec ? absl::StrCat(" '", frame.spec->name, "'") : "",
          " while this rank is at ", DescribeCollective(spec_),
          "; every rank must issue the same collectives in the same order"));
    }
    if (frame.kind == FrameKind::kAbort) return TakeAbortFrame(frame);
    if (absl::Status s = CheckSegment(*received, step, segment, chunk, expected); !s.ok()) {
      return s;
    }
    stats_.bytes_received += received->payload.size();
    return received;
  }
}

absl::Status RingExchange::CheckSegment(const ReceivedFrame& received, int step, int segment,
                                        int chunk, const ElementRange& expected) {
  const Frame& f = received.frame;
  if (f.sequence > spec_.sequence) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ranks called different collectives: rank ", me_.prev(), " is already at collective #",
        f.sequence, " while this rank is at ", DescribeCollective(spec_),
        "; every rank must issue the same collectives in the same order"));
  }
  if (f.kind != FrameKind::kSegment) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown frame kind ", static_cast<int>(f.kind), " from rank ", me_.prev()));
  }
  if (f.sender_rank != me_.prev()) {
    return absl::InvalidArgumentError(absl::StrCat("frame claims to come from rank ", f.sender_rank,
                                                   ", but this link leads to rank ", me_.prev()));
  }
  if (!spec_checked_) {
    if (!f.spec.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the first frame from rank ", me_.prev(), " lacks the collective description"));
    }
    if (absl::Status s = CheckAgreement(spec_, me_.rank, *f.spec, me_.prev()); !s.ok()) return s;
    spec_checked_ = true;
  }
  if (f.step != static_cast<uint32_t>(step) || f.segment != static_cast<uint32_t>(segment) ||
      f.chunk != static_cast<uint32_t>(chunk) || f.offset != expected.offset ||
      f.count != expected.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "out-of-schedule frame from rank ", me_.prev(), ": got step ", f.step, " segment ",
        f.segment, " chunk ", f.chunk, " elements [", f.offset, ", +", f.count, "), expected step ",
        step, " segment ", segment, " chunk ", chunk, " elements [", expected.offset, ", +",
        expected.count, ")"));
  }
  if (received.payload.size() != expected.count * element_size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame from rank ", me_.prev(), " carries ", received.payload.size(), " bytes for ",
        expected.count, " x ", DTypeName(spec_.dtype), " (", expected.count * element_size_,
        " bytes expected)"));
  }
  return absl::OkStatus();
}

absl::Status RingExchange::WatchForAbort(absl::Duration wait) {
  WaitLimit slice = limit_;
  slice.deadline = std::min(limit_.deadline, absl::Now() + wait);
  while (true) {
    absl::StatusOr<Frame> next = link_.Peek(slice);
    if (!next.ok()) return absl::OkStatus();  // nothing came, or the stream ended: not ours
    if (next->sequence > spec_.sequence) return absl::OkStatus();
    // An abort of this collective, or a leftover: take it off the link either way.
    absl::StatusOr<ReceivedFrame> taken = link_.Receive(slice);
    if (!taken.ok()) return absl::OkStatus();
    if (taken->frame.kind == FrameKind::kAbort && taken->frame.sequence == spec_.sequence) {
      return TakeAbortFrame(taken->frame);
    }
  }
}

absl::Status RingExchange::TakeAbortFrame(const Frame& frame) {
  ring_aborted_ = true;
  if (frame.abort_origin != me_.rank) abort_to_forward_ = frame;
  return absl::AbortedError(
      absl::StrCat("rank ", frame.abort_origin, " gave up: ", frame.abort_reason));
}

void RingExchange::NotifyAbort(const absl::Status& cause) {
  if (me_.world_size < 2) return;
  Frame frame;
  if (ring_aborted_) {
    if (!abort_to_forward_.has_value()) return;  // our own abort came back around
    frame = *abort_to_forward_;
    abort_to_forward_.reset();
  } else {
    frame.kind = FrameKind::kAbort;
    frame.generation = me_.generation;
    frame.sequence = spec_.sequence;
    frame.abort_origin = me_.rank;
    frame.abort_reason = std::string(cause.message());
    ring_aborted_ = true;
  }
  frame.sender_rank = me_.rank;
  // A fresh limit: the collective's own may be cancelled or spent already.
  WaitLimit notice;
  notice.deadline = absl::Now() + options_.abort_notice_timeout;
  link_.Send(frame, {}, notice).IgnoreError();  // best effort: the peer may be gone
}

absl::Status RingExchange::Reject(const absl::Status& why) {
  if (me_.world_size >= 2 && me_.rank >= 0 && me_.rank < me_.world_size) NotifyAbort(why);
  return Annotate(why);
}

absl::Status RingExchange::Annotate(const absl::Status& status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("rank ", me_.rank, " (generation ", me_.generation, ", ",
                                   DescribeCollective(spec_), "): ", status.message()));
}

}  // namespace ringsync
