// GrpcLinkFactory: the daemon's ring links — this rank's OutboundStream to rank+1's Peer
// service, and the inbox that rank-1's stream feeds through this worker's Peer service —
// and its stride links alike (to rank+s, from rank-s).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "core/link/stride_links.h"
#include "daemon/shm/frame_mailbox.h"
#include "daemon/shm/slot_ring.h"
#include "daemon/transport/grpc/grpc_link.h"
#include "daemon/transport/grpc/peer_service.h"
#include "daemon/worker/ring_epoch.h"
#include "wire/grpc_options.h"
#include "wire/security/transport_security.h"

namespace ringsync {

// A stride link's shared memory. Its frame mailbox carries the stride algorithms' frames
// (doubling, direct), commits and aborts, sized for kStrideLinkQueuedFrames such frames
// of up to kMailboxInlinePayloadBytes (the default --doubling_max_bytes) inline; larger
// ones (a raised --doubling_max_bytes) go on the stream. Its slots carry the segments of
// large scatters and gathers sent straight to their rank (core/ring/direct_transfer.h):
// two of the ring link's slot size (--segment_bytes), so that one segment is copied in
// while the receiver copies the other out (allocated with the link, they are mapped in
// as such a transfer touches them). With the ring link's mailbox (2 MiB, touched in full
// as it wraps) worker peak RSS at N=8 was 34 MiB instead of 28.
inline constexpr uint32_t kStrideLinkShmSlots = 2;
inline constexpr uint64_t kStrideLinkMailboxBytes = uint64_t{512} << 10;
// A stride algorithm's frame's record: the payload and, generously, its encoded header.
inline constexpr uint64_t kStrideLinkRecordBytes = kMailboxInlinePayloadBytes + (4 << 10);
static_assert(FrameMailboxLayout::MaxRecordBytes(kStrideLinkMailboxBytes) >= kStrideLinkRecordBytes,
              "a stride link's mailbox takes an inline stride frame in one record");
static_assert(kStrideLinkMailboxBytes - FrameMailboxLayout::ReserveBytes(kStrideLinkMailboxBytes) >=
                  kStrideLinkQueuedFrames * kStrideLinkRecordBytes,
              "a stride link's mailbox holds kStrideLinkQueuedFrames inline stride frames");

// The same-host path: see RingNeighbours::offer_shm.
struct SameHostPath {
  bool enabled = false;
  uint32_t slots = 8;
  uint64_t slot_bytes = uint64_t{1} << 20;
  uint64_t mailbox_bytes = uint64_t{2} << 20;  // RingNeighbours::shm_mailbox_bytes
};

class GrpcLinkFactory final : public LinkFactory {
 public:
  // `registry` is the one this worker's Peer service fills; it must outlive this.
  // `security`: how this worker's streams to rank+1 authenticate; `keepalive` and
  // `open_attempt`: see RingNeighbours.
  GrpcLinkFactory(std::string worker_id, InboxRegistry& registry,
                  TransportSecurity security = TransportSecurity(),
                  KeepaliveSettings keepalive = {}, absl::Duration open_attempt = absl::Seconds(2))
      : worker_id_(std::move(worker_id)),
        registry_(registry),
        security_(std::move(security)),
        keepalive_(keepalive),
        open_attempt_(open_attempt) {}

  void set_same_host_path(const SameHostPath& path) { same_host_path_ = path; }
  // Offer every neighbour a data connection (RingNeighbours::offer_data).
  void set_data_connections(bool offer) { offer_data_ = offer; }

  absl::StatusOr<std::unique_ptr<Link>> Connect(const RingEpoch& epoch,
                                                const WaitLimit& limit) override;
  absl::StatusOr<std::unique_ptr<Link>> ConnectStride(const RingEpoch& epoch, int stride,
                                                      const WaitLimit& limit) override;
  void RetireBefore(uint64_t generation, const absl::Status& why) override;
  void CloseAll(const absl::Status& why) override;

 private:
  const std::string worker_id_;
  InboxRegistry& registry_;
  const TransportSecurity security_;
  const KeepaliveSettings keepalive_;
  SameHostPath same_host_path_;
  bool offer_data_ = false;
  const absl::Duration open_attempt_;
  // The edge to rank+1 of a generation whose last Connect failed waiting for rank-1
  // (ConnectRingLink's `opened`): the next Connect of that generation goes on with it.
  // The kept edge when its generation is older than `generation`, else none; the caller
  // closes it outside the lock (closing waits for gRPC).
  OutboundEdge TakeKeptBefore(uint64_t generation);

  absl::Mutex kept_mu_;
  uint64_t kept_generation_ ABSL_GUARDED_BY(kept_mu_) = 0;
  OutboundEdge kept_ ABSL_GUARDED_BY(kept_mu_);

  // What every link to `rank` of `epoch` shares; `link` ends its description (" (stride
  // 2)"). REQUIRES: `rank` has an address in `epoch`.
  RingNeighbours NeighboursTo(const RingEpoch& epoch, int rank, absl::string_view link) const;
  // Notes `generation` when `link` got through at the address its neighbour joined from.
  void NoteHowItWasDialled(uint64_t generation, const GrpcLink& link);
  // The newest generation one of whose links needed the fallback address (0: none): its
  // later stride links dial theirs first (RingNeighbours::fallback_first) instead of each
  // waiting out the name's stalled attempts again (6 s apiece in a compose cluster whose
  // DNS server stopped answering).
  std::atomic<uint64_t> by_address_generation_{0};
};

}  // namespace ringsync
