#include "daemon/worker/grpc_link_factory.h"

#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/allreduce_algorithm.h"
#include "daemon/transport/grpc/grpc_link.h"

namespace ringsync {

namespace {

// Who may send to this rank in `epoch`, each with its worker id: rank-1 (the ring link) and
// rank-s for every stride link an algorithm may use — the doubling's (s = 2, 4, ... < N)
// and, on rings the direct exchange may run on, every other rank.
std::vector<ExpectedSender> SendersOf(const RingEpoch& epoch) {
  std::vector<ExpectedSender> senders;
  const int n = epoch.me.world_size;
  const bool every_stride = n <= kDirectRanksLimit;
  for (int stride = 1; stride < n; stride = every_stride ? stride + 1 : stride * 2) {
    const int from = (epoch.me.rank + n - stride) % n;
    if (from < static_cast<int>(epoch.worker_ids.size())) {
      senders.push_back(ExpectedSender{from, epoch.worker_ids[from], stride});
    }
  }
  return senders;
}

// Where `rank` joined the coordinator from, at its Peer service's port (FallbackTarget).
std::string FallbackTargetOf(const RingEpoch& epoch, int rank) {
  return rank < static_cast<int>(epoch.observed_hosts.size())
             ? FallbackTarget(epoch.peer_addresses[rank], epoch.observed_hosts[rank])
             : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Link>> GrpcLinkFactory::Connect(const RingEpoch& epoch,
                                                               const WaitLimit& limit) {
  const int next = epoch.me.next();
  if (next >= static_cast<int>(epoch.peer_addresses.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", epoch.me.generation, " has no address for rank ", next));
  }
  RingNeighbours neighbours = NeighboursTo(epoch, next, "");
  neighbours.shm_slots = same_host_path_.slots;
  neighbours.shm_slot_bytes = same_host_path_.slot_bytes;
  neighbours.shm_mailbox_bytes = same_host_path_.mailbox_bytes;
  const int prev = epoch.me.prev();
  if (prev >= static_cast<int>(epoch.worker_ids.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", epoch.me.generation, " has no worker id for rank ", prev));
  }
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox = registry_.Expect(
      epoch.me.generation, ExpectedSender{prev, epoch.worker_ids[prev]}, SendersOf(epoch));
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
  NoteHowItWasDialled(epoch.me.generation, **link);
  return std::unique_ptr<Link>(*std::move(link));
}

RingNeighbours GrpcLinkFactory::NeighboursTo(const RingEpoch& epoch, int rank,
                                             absl::string_view link) const {
  RingNeighbours neighbours;
  neighbours.next_target = epoch.peer_addresses[rank];
  neighbours.next_description =
      absl::StrCat(epoch.Describe(rank), " at ", neighbours.next_target, link);
  neighbours.worker_id = worker_id_;
  neighbours.security = security_;
  neighbours.keepalive = keepalive_;
  neighbours.open_attempt = open_attempt_;
  neighbours.fallback_target = FallbackTargetOf(epoch, rank);
  neighbours.offer_shm = same_host_path_.enabled;
  neighbours.offer_data = offer_data_;
  return neighbours;
}

void GrpcLinkFactory::NoteHowItWasDialled(uint64_t generation, const GrpcLink& link) {
  if (!link.dialled_by_address()) return;
  uint64_t noted = by_address_generation_.load();
  while (noted < generation && !by_address_generation_.compare_exchange_weak(noted, generation)) {
  }
}

absl::StatusOr<std::unique_ptr<Link>> GrpcLinkFactory::ConnectStride(const RingEpoch& epoch,
                                                                     int stride,
                                                                     const WaitLimit& limit) {
  const int n = epoch.me.world_size;
  if (stride < 1 || stride >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("no stride link of ", stride, " in a ring of ", n));
  }
  const int to = (epoch.me.rank + stride) % n;
  const int from = (epoch.me.rank + n - stride) % n;
  if (to >= static_cast<int>(epoch.peer_addresses.size()) ||
      from >= static_cast<int>(epoch.worker_ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generation ", epoch.me.generation, " has no address for rank ", to, " or no worker id for rank ", from));
  }
  RingNeighbours neighbours = NeighboursTo(epoch, to, absl::StrCat(" (stride ", stride, ")"));
  neighbours.fallback_first = by_address_generation_.load() == epoch.me.generation;
  neighbours.shm_slots = kStrideLinkShmSlots;
  neighbours.stride = stride;
  neighbours.shm_slot_bytes = same_host_path_.slot_bytes;
  neighbours.shm_mailbox_bytes = kStrideLinkMailboxBytes;
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox = registry_.Expect(
      epoch.me.generation, ExpectedSender{from, epoch.worker_ids[from], stride}, SendersOf(epoch));
  if (!inbox.ok()) return inbox.status();
  absl::StatusOr<std::unique_ptr<GrpcLink>> link =
      ConnectStrideLink(epoch.me, neighbours, *std::move(inbox), limit);
  if (!link.ok()) return link.status();
  NoteHowItWasDialled(epoch.me.generation, **link);
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
