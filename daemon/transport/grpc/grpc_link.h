// GrpcLink: the ring Link of one generation over gRPC — frames go out on this rank's
// OutboundStream to rank+1 and come in through the PeerInbox fed by rank-1's stream.
#pragma once

#include "wire/security/transport_security.h"

#include <memory>
#include <optional>
#include <string>

#include "core/link/link.h"
#include "core/ring/ring_member.h"
#include "daemon/transport/grpc/outbound_stream.h"
#include "daemon/transport/grpc/peer_inbox.h"

namespace ringsync {

// Where this rank's neighbours are.
struct RingNeighbours {
  std::string next_target;       // gRPC target of rank+1's Peer service
  std::string next_description;  // "rank 2 (worker w2 at 127.0.0.1:7401)"
  std::string worker_id;         // this worker's id, sent in the hello
  TransportSecurity security;    // how the stream to rank+1 authenticates
  KeepaliveSettings keepalive;   // how a silent rank+1 is noticed
  // How long one attempt to open the stream to rank+1 may wait for its acceptance before
  // it is abandoned and made again on a new channel (new name resolution, new TCP
  // connection): a first attempt can hang on a neighbour that was not reachable yet
  // (a container whose network was still being attached) although the next would succeed.
  absl::Duration open_attempt = absl::Seconds(2);
};

// Thread-safety: as Link (one sender thread, one receiver thread).
class GrpcLink final : public Link {
 public:
  GrpcLink(const RingMember& me, RingNeighbours neighbours,
           std::unique_ptr<OutboundStream> outbound, std::shared_ptr<PeerInbox> inbound)
      : me_(me),
        neighbours_(std::move(neighbours)),
        outbound_(std::move(outbound)),
        inbound_(std::move(inbound)) {}

  // A stream that broke (or that this rank gave up on, see OutboundStream::WriteFrame)
  // is reopened by the next Send, so one failed collective does not end the generation.
  // A collective one of whose segments failed to go out, or whose stream broke, cannot
  // continue (its receiver would find a gap): later segments of it fail with Unavailable;
  // its abort frame still goes out.
  absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit) override;
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    return inbound_->Pop(limit);
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override { return inbound_->Peek(limit); }
  uint64_t newest_aborted_sequence() const override { return inbound_->newest_aborted_sequence(); }
  size_t queued_frames() const override { return inbound_->queued(); }

  PeerInbox& inbound() { return *inbound_; }

 private:
  absl::Status SendOnStream(const Frame& frame, absl::Span<const std::byte> payload,
                            const WaitLimit& limit);

  const RingMember me_;
  const RingNeighbours neighbours_;
  std::unique_ptr<OutboundStream> outbound_;  // touched by the sending thread only
  // Touched by the sending thread only, like outbound_:
  std::optional<uint64_t> streamed_sequence_;  // collective the stream carried segments of last
  std::optional<uint64_t> failed_sequence_;    // collective one of whose segments did not go out
  std::shared_ptr<PeerInbox> inbound_;
};

// Opens the outbound stream of `me` for its generation and waits until rank-1's stream
// has arrived in `inbox` and is the expected sender. Fails at the limit.
absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectRingLink(const RingMember& me,
                                                          const RingNeighbours& neighbours,
                                                          std::shared_ptr<PeerInbox> inbox,
                                                          const WaitLimit& limit);

}  // namespace ringsync
