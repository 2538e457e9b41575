#include "core/ring/ring_exchange.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/outcome.h"
#include "core/ring/rank_messages.h"
#include "core/ring/schedule.h"

namespace ringsync {

RingExchange::RingExchange(const RingMember& me, Link& link, const CollectiveSpec& spec,
                           const RingOptions& options)
    : me_(me),
      link_(link),
      spec_(spec),
      options_(options),
      element_size_(DTypeSize(spec.dtype)),
      cancellation_(options.cancellation),
      abort_(me, spec_),
      min_segment_bytes_(link.min_useful_segment_bytes()) {
  limit_.deadline = SteadyDeadline(options.timeout);
  limit_.cancellation = &cancellation_;
}

absl::Status RingExchange::CheckSpecOf(const Frame& frame,
                                       std::optional<absl::Status>& mismatch) const {
  if (!frame.spec.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("agreement frame from rank ", me_.prev(),
                                                   " for rank ", frame.chunk,
                                                   " arrived without a spec"));
  }
  if (!mismatch.has_value()) {
    const int origin = static_cast<int>(frame.chunk);
    if (absl::Status s = CheckAgreement(spec_, me_.rank, *frame.spec, origin); !s.ok()) {
      mismatch = s;
    }
  }
  return absl::OkStatus();
}

absl::Status RingExchange::AgreeBeforeTouching(RingStats* stats) {
  absl::Status agreed = Agree();
  if (!agreed.ok()) {
    ExportStats(stats);
    if (stats != nullptr) stats->buffer_untouched = true;
  }
  return agreed;
}

absl::Status RingExchange::Agree() {
  if (me_.world_size < 2) return absl::OkStatus();
  std::optional<absl::Status> mismatch;
  Frame outgoing;
  outgoing.kind = FrameKind::kAgree;
  outgoing.spec = spec_;
  outgoing.min_segment_bytes = min_segment_bytes_;
  absl::Status result = RelayAround(outgoing, "agreement", [&](const Frame& frame) {
    min_segment_bytes_ = std::max<size_t>(min_segment_bytes_, frame.min_segment_bytes);
    return CheckSpecOf(frame, mismatch);
  });
  return FinishAgreement(std::move(result), mismatch);
}

absl::Status RingExchange::AgreeCarrying(
    absl::Span<const std::byte> contribution,
    absl::FunctionRef<absl::Status(int origin, ReceivedFrame frame)> on_contribution) {
  if (me_.world_size < 2) return absl::OkStatus();
  std::optional<absl::Status> mismatch;
  Frame outgoing;
  outgoing.kind = FrameKind::kRelay;
  outgoing.spec = spec_;
  outgoing.count = spec_.count;
  absl::Status result = RelayAroundCarrying(
      outgoing, "agreement", contribution, [&](ReceivedFrame received) -> absl::Status {
        const Frame& frame = received.frame;
        if (absl::Status s = CheckSpecOf(frame, mismatch); !s.ok()) return s;
        if (mismatch.has_value()) return absl::OkStatus();  // reported after the pass
        if (frame.count != spec_.count || received.payload.size() != spec_.count * element_size_) {
          return absl::InvalidArgumentError(absl::StrCat(
              "relay frame from rank ", me_.prev(), " for rank ", frame.chunk, " carries ",
              received.payload.size(), " bytes for ", spec_.count, " x ", DTypeName(spec_.dtype)));
        }
        return on_contribution(static_cast<int>(frame.chunk), std::move(received));
      });
  return FinishAgreement(std::move(result), mismatch);
}

absl::Status RingExchange::FinishAgreement(absl::Status result,
                                           const std::optional<absl::Status>& mismatch) {
  if (!result.ok()) {
    result = ExplainCancel(result);
    NotifyAbort(result);
    return Annotate(result);
  }
  // Every rank saw every spec, so every rank finds a mismatch if there is one: no abort
  // frame is needed, and each rank quotes the pair it saw.
  if (mismatch.has_value()) return Annotate(*mismatch);
  return absl::OkStatus();
}

absl::Status RingExchange::Commit() {
  data_completed_ = true;
  if (me_.world_size < 2) return absl::OkStatus();
  Frame outgoing;
  outgoing.kind = FrameKind::kCommit;
  int heard = 0;  // steps whose commit frame arrived: ranks rank-1 .. rank-heard
  absl::Status result = RelayAround(outgoing, "commit", [&heard](const Frame&) {
    ++heard;
    return absl::OkStatus();
  });
  if (result.ok()) return absl::OkStatus();
  result = ExplainCancel(result);
  NotifyAbort(result);  // marked as given up after the data: receivers stay in doubt
  if (abort_.origin_before_commit()) {
    // The rank that gave up never completed its data, so it sent no commit frame and no
    // rank can have returned OK: a plain failure, like every rank's.
    return Annotate(result);
  }
  std::string unheard;
  for (int step = heard; step + 1 < me_.world_size; ++step) {
    absl::StrAppend(&unheard, unheard.empty() ? "" : ", ", RingMod(me_.rank - 1 - step, me_.world_size));
  }
  return WithOutcomeMark(
      Annotate(CommitInDoubt(result, unheard, "; this rank's buffer is untouched")),
      OutcomeMark::kInDoubt);
}

absl::Status RingExchange::ExplainCancel(absl::Status status) const {
  return ringsync::ExplainCancel(std::move(status), options_.cancellation);
}

absl::Status RingExchange::RelayAround(Frame outgoing, absl::string_view pass,
                                       absl::FunctionRef<absl::Status(const Frame&)> on_frame) {
  return RelayAroundCarrying(std::move(outgoing), pass, {},
                             [&](ReceivedFrame received) { return on_frame(received.frame); });
}

absl::Status RingExchange::RelayAroundCarrying(
    Frame outgoing, absl::string_view pass, absl::Span<const std::byte> payload,
    absl::FunctionRef<absl::Status(ReceivedFrame)> on_frame) {
  const int n = me_.world_size;
  std::vector<std::byte> forwarding;  // the payload being forwarded, in one piece
  outgoing.sender_rank = me_.rank;
  outgoing.generation = me_.generation;
  outgoing.sequence = spec_.sequence;
  outgoing.chunk = static_cast<uint32_t>(me_.rank);
  const FrameKind own_kind = outgoing.kind;
  // A send waits while the next rank takes no frames. If the ring gave this collective up
  // (that rank, or one before it, failed), the next rank may never take another: the
  // ring's abort, arriving from the left while this rank waits, ends the send, and is
  // then taken to say why (not this rank's deadline, long after).
  const Cancellation given_up(
      &cancellation_, [this] { return AbortArrived(); },
      absl::AbortedError("an abort of this collective arrived from the previous rank"));
  WaitLimit send_limit = limit_;
  send_limit.cancellation = &given_up;
  for (int step = 0; step + 1 < n; ++step) {
    outgoing.step = static_cast<uint32_t>(step);
    if (absl::Status s = link_.Send(outgoing, payload, send_limit); !s.ok()) {
      if (AbortArrived()) {
        if (absl::Status cause = WatchForAbort(absl::ZeroDuration()); !cause.ok()) return cause;
      }
      return absl::Status(s.code(), absl::StrCat("sending ", pass, " step ", step, " to rank ",
                                                 me_.next(), ": ", s.message()));
    }
    ++stats_.frames_sent;
    stats_.bytes_sent += payload.size();
    absl::StatusOr<ReceivedFrame> received =
        ReceiveOwn([pass, step] { return absl::StrCat(pass, " step ", step); });
    if (!received.ok()) return received.status();
    const Frame& frame = received->frame;
    if (absl::Status s = CheckFrame(frame, own_kind); !s.ok()) {
      // Ranks that disagree on an all-reduce's size may have chosen different algorithms:
      // the pass goes on, each frame forwarded as its origin sent it, so that every rank
      // sees every spec and reports the disagreement itself, as with one algorithm.
      if (!IsDisagreeingAgreement(frame, own_kind)) return s;
    }
    const int origin = RingMod(me_.rank - 1 - step, n);
    if (frame.step != static_cast<uint32_t>(step) || frame.chunk != static_cast<uint32_t>(origin)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "out-of-schedule ", pass, " frame from rank ", me_.prev(), ": got step ", frame.step,
          " for rank ", frame.chunk, ", expected step ", step, " for rank ", origin));
    }
    outgoing.kind = frame.kind;
    outgoing.chunk = frame.chunk;
    outgoing.spec = frame.spec;
    outgoing.count = frame.count;
    outgoing.min_segment_bytes = frame.min_segment_bytes;
    stats_.bytes_received += received->payload.size();
    if (!received->payload.empty()) {
      forwarding = received->payload.ToVector();
      payload = forwarding;
    } else {
      payload = {};
    }
    if (absl::Status s = on_frame(*std::move(received)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

Frame RingExchange::SegmentFrame(int step, int segment, int chunk,
                                 const ElementRange& range) const {
  Frame frame = StampedFrame(FrameKind::kSegment, me_, spec_.sequence, step, segment, chunk);
  frame.offset = range.offset;
  frame.count = range.count;
  return frame;
}

absl::Status RingExchange::SendingSegment(int step, int segment, const absl::Status& failed) const {
  return absl::Status(failed.code(), absl::StrCat("sending step ", step, " segment ", segment,
                                                  " to rank ", me_.next(), ": ", failed.message()));
}

absl::Status RingExchange::SendSegment(int step, int segment, int chunk, const ElementRange& range,
                                       absl::Span<const std::byte> payload) {
  if (absl::Status s = link_.Send(SegmentFrame(step, segment, chunk, range), payload, limit_);
      !s.ok()) {
    return SendingSegment(step, segment, s);
  }
  stats_.bytes_sent += payload.size();
  ++stats_.frames_sent;
  return absl::OkStatus();
}

void RingExchange::PostSegment(int step, int segment, int chunk, const ElementRange& range,
                               absl::Span<const std::byte> payload, SendDone done) {
  // Counted when posted: a posted frame that fails fails the collective, whose counts
  // then describe nothing.
  stats_.bytes_sent += payload.size();
  ++stats_.frames_sent;
  link_.PostSend(SegmentFrame(step, segment, chunk, range), payload, limit_,
                 [this, step, segment, done = std::move(done)](absl::Status sent) mutable {
                   done(sent.ok() ? sent : SendingSegment(step, segment, sent));
                 });
}

absl::StatusOr<ReceivedFrame> RingExchange::ReceiveOwn(absl::FunctionRef<std::string()> what) {
  while (true) {
    absl::StatusOr<ReceivedFrame> received = link_.Receive(limit_);
    if (absl::IsDeadlineExceeded(received.status()) && frames_received_ > 0) {
      // The left neighbour was making progress, so it is more likely stuck behind the
      // rank that caused the stall than the cause: give its abort notice, which names
      // that rank, a moment to arrive.
      WaitLimit grace = limit_;
      grace.deadline = SteadyDeadline(options_.abort_notice_timeout);
      absl::StatusOr<ReceivedFrame> late = link_.Receive(grace);
      if (late.ok() && late->frame.kind == FrameKind::kAbort &&
          late->frame.sequence == spec_.sequence) {
        return TakeAbortFrame(late->frame);
      }
    }
    if (!received.ok()) {
      const absl::Status& s = received.status();
      return absl::Status(s.code(), absl::StrCat("waiting for ", what(), " from rank ",
                                                 me_.prev(), ": ", s.message()));
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
    return received;
  }
}

namespace {

// The agreement frame of the other all-reduce algorithm on the ring link: the ring's
// kAgree vs the relay's kRelay. (Their passes have one schedule, so a rank can forward
// the other's frames; the stride algorithms' kinds are told apart in CheckFrame.)
bool IsOtherAgreementKind(FrameKind got, FrameKind own) {
  return (got == FrameKind::kAgree && own == FrameKind::kRelay) ||
         (got == FrameKind::kRelay && own == FrameKind::kAgree);
}

}  // namespace

bool RingExchange::IsDisagreeingAgreement(const Frame& f, FrameKind own) const {
  return IsOtherAgreementKind(f.kind, own) && f.spec.has_value() && f.sequence == spec_.sequence &&
         f.sender_rank == me_.prev() &&
         !CheckAgreement(spec_, me_.rank, *f.spec, static_cast<int>(f.chunk)).ok();
}

absl::Status RingExchange::CheckFrame(const Frame& f, FrameKind kind) const {
  if (f.sequence > spec_.sequence) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ranks called different collectives: rank ", me_.prev(), " is already at collective #",
        f.sequence, " while this rank is at ", DescribeCollective(spec_),
        "; every rank must issue the same collectives in the same order"));
  }
  if (f.kind != kind && IsAgreementKind(f.kind) && IsAgreementKind(kind)) {
    return DifferentAlgorithmsError(spec_, me_, f, me_.prev(), kind);
  }
  if (f.kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat(FrameKindName(f.kind), " from rank ", me_.prev(),
                                                   " where ", FrameKindName(kind),
                                                   " belongs (a frame was lost or misplaced)"));
  }
  if (f.sender_rank != me_.prev()) {
    return absl::InvalidArgumentError(absl::StrCat("frame claims to come from rank ", f.sender_rank,
                                                   ", but this link leads to rank ", me_.prev()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReceivedFrame> RingExchange::ReceiveSegment(int step, int segment, int chunk,
                                                           const ElementRange& expected) {
  absl::StatusOr<ReceivedFrame> received =
      ReceiveOwn([step, segment] { return absl::StrCat("step ", step, " segment ", segment); });
  if (!received.ok()) return received;
  if (absl::Status s = CheckSegment(*received, step, segment, chunk, expected); !s.ok()) {
    return s;
  }
  stats_.bytes_received += received->payload.size();
  return received;
}

absl::Status RingExchange::CheckSegment(const ReceivedFrame& received, int step, int segment,
                                        int chunk, const ElementRange& expected) {
  const Frame& f = received.frame;
  if (absl::Status s = CheckFrame(f, FrameKind::kSegment); !s.ok()) return s;
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
  slice.deadline = std::min(limit_.deadline, SteadyDeadline(wait));
  while (true) {
    absl::StatusOr<Frame> next = link_.Peek(slice);
    if (!next.ok()) return absl::OkStatus();  // nothing came, or the stream ended: not ours
    if (next->sequence > spec_.sequence) return absl::OkStatus();
    // The left neighbour's commit frame stays on the link for Commit — unless an abort of
    // this collective waits behind it: then this rank fails anyway (its data is not
    // complete, so plainly), and taking the commit frames reaches the abort now rather
    // than after the blocked sender's deadline.
    if (next->sequence == spec_.sequence && next->kind != FrameKind::kAbort && !AbortArrived()) {
      return absl::OkStatus();
    }
    // An abort of this collective, a commit frame ahead of one, or a leftover: take it.
    absl::StatusOr<ReceivedFrame> taken = link_.Receive(slice);
    if (!taken.ok()) return absl::OkStatus();
    if (taken->frame.kind == FrameKind::kAbort && taken->frame.sequence == spec_.sequence) {
      return TakeAbortFrame(taken->frame);
    }
  }
}

absl::Status RingExchange::TakeAbortFrame(const Frame& frame) { return abort_.Take(frame); }

void RingExchange::NotifyAbort(const absl::Status& cause) {
  const std::optional<Frame> notice = abort_.ToSend(cause, data_completed_);
  if (!notice.has_value()) return;
  // A fresh limit: the collective's own may be cancelled or spent already.
  WaitLimit limit;
  limit.deadline = SteadyDeadline(options_.abort_notice_timeout);
  link_.Send(*notice, {}, limit).IgnoreError();  // best effort: the peer may be gone
}

absl::Status RingExchange::Reject(const absl::Status& why) {
  if (me_.world_size >= 2 && me_.rank >= 0 && me_.rank < me_.world_size) NotifyAbort(why);
  return Annotate(why);
}

absl::Status RingExchange::Annotate(const absl::Status& status) const {
  return AnnotateRankFailure(status, me_, spec_);
}

}  // namespace ringsync
