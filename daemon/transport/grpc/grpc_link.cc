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
  return std::make_unique<GrpcLink>(*std::move(outbound), std::move(inbox));
}

}  // namespace ringsync
