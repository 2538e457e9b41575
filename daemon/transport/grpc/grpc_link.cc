#include "daemon/transport/grpc/grpc_link.h"

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectRingLink(const RingMember& me,
                                                          const RingNeighbours& neighbours,
                                                          std::shared_ptr<PeerInbox> inbox,
                                                          const WaitLimit& limit) {
  const PeerHello hello{me.rank, me.generation, neighbours.worker_id};
  absl::StatusOr<std::unique_ptr<OutboundStream>> outbound = OutboundStream::Open(
      neighbours.next_target, hello, neighbours.next_description, limit);
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
  if (outbound_->broken()) {
    absl::StatusOr<std::unique_ptr<OutboundStream>> reopened = OutboundStream::Open(
        neighbours_.next_target, PeerHello{me_.rank, me_.generation, neighbours_.worker_id},
        neighbours_.next_description, limit);
    if (!reopened.ok()) {
      return absl::Status(reopened.status().code(),
                          absl::StrCat("reconnecting: ", reopened.status().message()));
    }
    outbound_ = *std::move(reopened);
  }
  return outbound_->WriteFrame(frame, payload, limit);
}

}  // namespace ringsync
