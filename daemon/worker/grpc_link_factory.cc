#include "daemon/worker/grpc_link_factory.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/grpc_link.h"

namespace ringsync {

absl::StatusOr<std::unique_ptr<Link>> GrpcLinkFactory::Connect(const RingEpoch& epoch,
                                                               const WaitLimit& limit) {
  const int next = epoch.me.next();
  if (next >= static_cast<int>(epoch.peer_addresses.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", epoch.me.generation, " has no address for rank ", next));
  }
  const std::string& address = epoch.peer_addresses[next];
  RingNeighbours neighbours{address, absl::StrCat(epoch.Describe(next), " at ", address),
                            worker_id_, security_, keepalive_, open_attempt_};
  neighbours.offer_shm = same_host_path_.enabled;
  neighbours.shm_slots = same_host_path_.slots;
  neighbours.shm_slot_bytes = same_host_path_.slot_bytes;
  neighbours.shm_mailbox_bytes = same_host_path_.mailbox_bytes;
  const int prev = epoch.me.prev();
  if (prev >= static_cast<int>(epoch.worker_ids.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", epoch.me.generation, " has no worker id for rank ", prev));
  }
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox = registry_.Expect(
      epoch.me.generation, ExpectedSender{prev, epoch.worker_ids[prev]});
  if (!inbox.ok()) return inbox.status();
  OutboundEdge opened;
  {
    absl::MutexLock lock(&kept_mu_);
    if (kept_generation_ == epoch.me.generation) opened = std::exchange(kept_, {});
  }
  absl::StatusOr<std::unique_ptr<GrpcLink>> link =
      ConnectRingLink(epoch.me, neighbours, *std::move(inbox), limit, &opened);
  if (opened.stream != nullptr) {
    OutboundEdge older;  // closed outside the lock: closing waits for gRPC
    absl::MutexLock lock(&kept_mu_);
    older = std::exchange(kept_, std::move(opened));
    kept_generation_ = epoch.me.generation;
  }
  if (!link.ok()) return link.status();
  return std::unique_ptr<Link>(*std::move(link));
}

OutboundEdge GrpcLinkFactory::TakeKeptBefore(uint64_t generation) {
  absl::MutexLock lock(&kept_mu_);
  return kept_generation_ < generation ? std::exchange(kept_, {}) : OutboundEdge{};
}

void GrpcLinkFactory::RetireBefore(uint64_t generation, const absl::Status& why) {
  const OutboundEdge retired = TakeKeptBefore(generation);  // closed on return
  registry_.RetireBefore(generation, why);
}

void GrpcLinkFactory::CloseAll(const absl::Status& why) {
  const OutboundEdge closed = TakeKeptBefore(std::numeric_limits<uint64_t>::max());
  registry_.CloseAll(why);
}

}  // namespace ringsync
