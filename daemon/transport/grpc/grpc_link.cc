#include "daemon/transport/grpc/grpc_link.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "wire/grpc_options.h"

namespace ringsync {
namespace {

absl::StatusOr<std::unique_ptr<OutboundStream>> OpenWithRetries(const RingNeighbours& neighbours,
                                                                 const PeerHello& hello,
                                                                 const WaitLimit& limit) {
  // One channel for every attempt: its name resolution and reconnect backoff go on
  // across attempts (outbound_stream.h, OpenOn); each attempt is a new stream on it.
  const std::shared_ptr<grpc::Channel> channel = neighbours.security.CreateChannel(
      neighbours.next_target, PeerChannelArguments(neighbours.keepalive));
  while (true) {
    WaitLimit attempt = limit;
    attempt.deadline = std::min(limit.deadline, absl::Now() + neighbours.open_attempt);
    absl::StatusOr<std::unique_ptr<OutboundStream>> outbound =
        OutboundStream::OpenOn(channel, hello, neighbours.next_description, attempt);
    // Only an attempt that got no answer is worth making again; a refusal says why.
    if (outbound.ok() || !absl::IsDeadlineExceeded(outbound.status()) ||
        absl::Now() >= limit.deadline ||
        (limit.cancellation != nullptr && limit.cancellation->IsCancelled())) {
      return outbound;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectRingLink(const RingMember& me,
                                                          const RingNeighbours& neighbours,
                                                          std::shared_ptr<PeerInbox> inbox,
                                                          const WaitLimit& limit) {
  const PeerHello hello{me.rank, me.generation, neighbours.worker_id};
  absl::StatusOr<std::unique_ptr<OutboundStream>> outbound =
      OpenWithRetries(neighbours, hello, limit);
  if (!outbound.ok()) return outbound.status();
  absl::StatusOr<int> sender = inbox->AwaitSender(limit);
  if (!sender.ok()) {
    return absl::Status(sender.status().code(),
                        absl::StrCat("rank ", me.prev(), " did not connect its ring stream: ",
                                     sender.status().message()));
  }
  if (*sender != me.prev()) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", me.generation, ": the incoming ring stream is from rank ",
                     *sender, ", but this rank's left neighbour is rank ", me.prev()));
  }
  return std::make_unique<GrpcLink>(me, neighbours, *std::move(outbound), std::move(inbox));
}

absl::Status GrpcLink::Send(const Frame& frame, absl::Span<const std::byte> payload,
                            const WaitLimit& limit) {
  const bool segment = frame.kind != FrameKind::kAbort;  // part of the collective's stream
  // Once a segment of a collective failed to go out, a later one would leave a gap.
  if (segment && frame.sequence == failed_sequence_) {
    return absl::UnavailableError(absl::StrCat(
        "an earlier frame of collective #", frame.sequence, " to ",
        neighbours_.next_description, " was not sent, so the collective cannot go on"));
  }
  absl::Status sent = SendOnStream(frame, payload, limit);
  if (!sent.ok() && segment) failed_sequence_ = frame.sequence;
  return sent;
}

absl::Status GrpcLink::SendOnStream(const Frame& frame, absl::Span<const std::byte> payload,
                                    const WaitLimit& limit) {
  const bool segment = frame.kind != FrameKind::kAbort;  // part of the collective's stream
  if (outbound_->broken()) {
    // Frames the broken stream carried may be lost (a cancelled HTTP/2 stream drops what
    // its receiver has not read), so the collective it was carrying must not continue on
    // a new stream: its receiver would find a gap, or blame this rank's schedule. Its
    // abort and later collectives use the new stream.
    if (segment && frame.sequence == streamed_sequence_) {
      return absl::UnavailableError(absl::StrCat(
          "the ring stream to ", neighbours_.next_description, " broke during collective #",
          frame.sequence, "; frames of it may be lost, so it cannot go on"));
    }
    // Not wait-for-ready: rank+1 of this generation was listening when the link formed,
    // so a refused connection means it died. Failing at once (rather than waiting out
    // `limit` for a port that will not come back) lets an abort notice to a dead peer cost
    // nothing, and this rank fail promptly; a new generation replaces the dead rank.
    absl::StatusOr<std::unique_ptr<OutboundStream>> reopened = OutboundStream::Open(
        neighbours_.next_target, PeerHello{me_.rank, me_.generation, neighbours_.worker_id},
        neighbours_.next_description, limit, neighbours_.security, neighbours_.keepalive,
        /*wait_for_ready=*/false);
    if (!reopened.ok()) {
      return absl::Status(reopened.status().code(),
                          absl::StrCat("reconnecting: ", reopened.status().message()));
    }
    outbound_ = *std::move(reopened);
  }
  if (segment) streamed_sequence_ = frame.sequence;
  return outbound_->WriteFrame(frame, payload, limit);
}

}  // namespace ringsync
