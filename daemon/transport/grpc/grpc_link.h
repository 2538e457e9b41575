// GrpcLink: the ring Link of one generation over gRPC — frames go out on this rank's
// OutboundStream to rank+1 and come in through the PeerInbox fed by rank-1's stream.
#pragma once

#include "wire/security/transport_security.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "core/link/link.h"
#include "daemon/shm/frame_mailbox.h"
#include "core/ring/ring_member.h"
#include "daemon/shm/slot_ring.h"
#include "daemon/transport/grpc/outbound_stream.h"
#include "daemon/transport/grpc/peer_inbox.h"
#include "daemon/transport/tcp/data_connection.h"

namespace ringsync {

// On the same-host path with a frame mailbox, a frame whose payload is at most this
// travels inside its mailbox record (one copy each way); a larger segment or relay
// payload waits in a slot, from which the receiver reduces in place, and any other
// larger frame goes on the stream.
inline constexpr size_t kMailboxInlinePayloadBytes = 64 << 10;

// Link::min_useful_segment_bytes on gRPC bytes. A message through gRPC costs on the order
// of 100 us of a 2-core host's CPU: a 4 MiB broadcast cut into 128 KiB segments took 1.8x
// as long as in 512 KiB ones over gRPC, and a 1 MiB one sent whole 0.7x as long as in
// eight pieces.
inline constexpr size_t kGrpcMinSegmentBytes = size_t{1} << 20;

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
  // The same Peer service at the address the coordinator saw rank+1 join from
  // (FallbackTarget); empty for none. When next_target's name has not resolved or
  // connected after a few attempts, attempts alternate to it, the certificate still
  // checked against next_target's host.
  std::string fallback_target;
  // Dial fallback_target first (a link of the same generation needed it: the resolver
  // that stalled on one name holds up the lookups queued behind it); attempts alternate
  // to the name after the same stalled attempts.
  bool fallback_first = false;
  // The same-host path (--peer_transport=auto): offer rank+1 a shared-memory slot ring of
  // `shm_slots` slots of `shm_slot_bytes` (at least the segment size) in each hello; the
  // payload of a segment that fits goes through it when rank+1 accepted the offer, every
  // other frame (and everything when it did not) as gRPC bytes.
  bool offer_shm = false;
  uint32_t shm_slots = 8;
  uint64_t shm_slot_bytes = uint64_t{1} << 20;
  // With offer_shm: the frame mailbox offered in the same region (0: none). When rank+1
  // accepts it, every frame goes through it (daemon/shm/frame_mailbox.h) — a small
  // frame's hop then costs a futex wake instead of a gRPC message — and the gRPC stream
  // carries only the hello, a frame too large for the mailbox, and the stream's liveness.
  uint64_t shm_mailbox_bytes = uint64_t{2} << 20;
  // A data connection (daemon/transport/tcp/data_connection.h): offer rank+1 to send
  // the stream's frames on a TCP connection of their own. When rank+1 asks for it (it is
  // not on this host's shared-memory path and listens for data connections), every frame
  // goes there — a frame then costs a write and a read instead of gRPC's HTTP/2 framing
  // and thread hand-offs — and the stream carries only the hello and liveness. A
  // connection that cannot be made leaves the frames on the stream.
  bool offer_data = false;
  // The link this stream is, told in the hello (PeerHello::stride): 1 the ring link
  // (next_target is rank+1), s > 1 the stride link to rank+s.
  int stride = 1;
};

// `observed_host` (RingMember.observed_host) at `target`'s port as a gRPC target that
// needs no resolver ("ipv4:198.18.0.3:7401", "ipv6:[::1]:7401"), for
// RingNeighbours::fallback_target; empty when there is none to
// fall back to: no observed host, a target that is already an IP address (no name to
// resolve), or one without a port.
std::string FallbackTarget(absl::string_view target, absl::string_view observed_host);

// An open stream to rank+1 and what its receiver accepted with it: the slot ring
// offered in the hello, or the data connection it asked for (or neither).
struct OutboundEdge {
  std::unique_ptr<OutboundStream> stream;
  std::unique_ptr<SlotRingWriter> slots;
  std::unique_ptr<RecordSender> data;
  bool by_address = false;  // opened at RingNeighbours::fallback_target, not by the name
};

// Thread-safety: as Link (one sender thread, one receiver thread).
class GrpcLink final : public Link {
 public:
  GrpcLink(const RingMember& me, RingNeighbours neighbours, OutboundEdge outbound,
           std::shared_ptr<PeerInbox> inbound)
      : me_(me),
        neighbours_(std::move(neighbours)),
        inbound_(std::move(inbound)) {
    UseEdge(std::move(outbound));
  }

  // A stream that broke (or that this rank gave up on, see OutboundStream::WriteFrame)
  // is reopened by the next Send, so one failed collective does not end the generation.
  // A collective one of whose segments failed to go out, or whose stream broke, cannot
  // continue (its receiver would find a gap): later segments of it fail with Unavailable;
  // its abort frame still goes out.
  absl::Status Send(const Frame& frame, absl::Span<const std::byte> payload,
                    const WaitLimit& limit) override;
  // Sends are posted on the gRPC path: PostSend queues the frame zero-copy on the stream,
  // whose write completions start the next one. (The slot ring's sends wait for a free
  // slot, so they are not posted.)
  // (Nor are a data connection's: they write from the sending thread.)
  bool posts_sends() const override { return !shm_active_ && !data_active_; }
  void PostSend(const Frame& frame, absl::Span<const std::byte> payload, const WaitLimit& limit,
                SendDone done) override;
  // Cancels the stream; the next frame reopens it (as after any broken stream).
  void AbandonPostedSends() override { outbound_->GiveUp(); }
  absl::StatusOr<ReceivedFrame> Receive(const WaitLimit& limit) override {
    return inbound_->Pop(limit);
  }
  absl::StatusOr<Frame> Peek(const WaitLimit& limit) override { return inbound_->Peek(limit); }
  uint64_t newest_aborted_sequence() const override { return inbound_->newest_aborted_sequence(); }
  size_t queued_frames() const override { return inbound_->queued(); }
  // "shm" while segments to rank+1 go through the slot ring, "tcp" while frames go on a
  // data connection, else "grpc".
  absl::string_view transport() const override {
    return shm_active_ ? "shm" : data_active_ ? "tcp" : "grpc";
  }
  // On gRPC bytes, kGrpcMinSegmentBytes: a message through gRPC costs far more than a
  // frame on the slot ring or a data connection.
  size_t min_useful_segment_bytes() const override {
    return shm_active_ || data_active_ ? Link::min_useful_segment_bytes() : kGrpcMinSegmentBytes;
  }
  // Whether frames to rank+1 go through the slot ring's frame mailbox.
  bool frames_in_mailbox() const { return mailbox_active_; }
  // Whether the stream to rank+1 went to RingNeighbours::fallback_target. Read it before
  // the link sends: a reopened stream changes it on the sending thread.
  bool dialled_by_address() const { return by_address_; }
  // Whether the stream to rank+1 is known to be broken (its receiver ended it, a write
  // failed), so that the next frame reopens it. Read it while the link does not send, as
  // dialled_by_address.
  bool stream_broken() const { return outbound_->broken(); }

  PeerInbox& inbound() { return *inbound_; }

 private:
  // Reopens a broken stream for `frame` — unless the frame belongs to the collective the
  // broken stream was carrying — and notes which collective the stream carries.
  absl::Status ReadyStream(const Frame& frame, const WaitLimit& limit);
  absl::Status SendOnStream(const Frame& frame, absl::Span<const std::byte> payload,
                            const WaitLimit& limit);
  // The frame into the mailbox: inline when small, its payload in a slot when it fits
  // one, else on the stream behind an empty record that says so.
  absl::Status SendThroughMailbox(const Frame& frame, absl::Span<const std::byte> payload,
                                  const WaitLimit& limit);
  // The frame as one record on the data connection; a failure breaks the connection and
  // gives the stream up with it (the next frame reopens both).
  absl::Status SendOnData(const Frame& frame, absl::Span<const std::byte> payload,
                          const WaitLimit& limit);
  // `failed`, saying which neighbour it was sending to.
  absl::Status SendingTo(const absl::Status& failed) const;
  // Takes the stream just opened (or reopened) and what its receiver accepted with it.
  void UseEdge(OutboundEdge edge);

  const RingMember me_;
  const RingNeighbours neighbours_;
  std::unique_ptr<OutboundStream> outbound_;  // touched by the sending thread only
  std::unique_ptr<SlotRingWriter> slots_;     // outbound_'s accepted slot ring, or null
  std::atomic<bool> shm_active_{false};       // slots_ != nullptr, for other threads
  std::atomic<bool> mailbox_active_{false};   // frames go through slots_'s mailbox
  std::unique_ptr<RecordSender> data_;         // outbound_'s data connection, or null
  std::atomic<bool> data_active_{false};       // data_ != nullptr, for other threads
  // Touched by the sending thread only, like outbound_:
  bool by_address_ = false;  // outbound_ went to the fallback target: reopen it there
  std::optional<uint64_t> streamed_sequence_;  // collective the stream carried segments of last
  std::optional<uint64_t> failed_sequence_;    // collective one of whose segments did not go out
  std::shared_ptr<PeerInbox> inbound_;
};

// Opens the stream to rank+1 (offering a slot ring when `neighbours.offer_shm`; a ring that
// cannot be made is not offered; offering a data connection when `neighbours.offer_data`,
// which it makes within `limit` when the receiver asks for it). `wait_for_ready`: see OutboundStream::Open.
// `channel`: one to open the stream on (PeerChannelArguments), or null for a new one.
absl::StatusOr<OutboundEdge> OpenOutboundEdge(const RingMember& me, const RingNeighbours& neighbours,
                                              std::shared_ptr<grpc::Channel> channel,
                                              const WaitLimit& limit, bool wait_for_ready);

// Opens the outbound stream of `me` for its generation and waits until rank-1's stream
// has arrived in `inbox` and is the expected sender. Fails at the limit.
// `opened` (optional): an edge to rank+1 that an earlier attempt of the same generation
// opened. It is used instead of a new one while its stream is not broken; and when this
// attempt fails waiting for rank-1, its open edge is left there for the next attempt
// instead of being closed, because rank+1 may have formed its side already and be
// waiting on it in a collective: closing it would fail that collective on every rank
// for a delay that is only rank-1's.
absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectRingLink(const RingMember& me,
                                                          const RingNeighbours& neighbours,
                                                          std::shared_ptr<PeerInbox> inbox,
                                                          const WaitLimit& limit,
                                                          OutboundEdge* opened = nullptr);

// A stride link (core/link/stride_links.h): opens the outbound stream of `me` to the rank
// `neighbours` names, whose frames come in through `inbox` (the one the view says rank-s
// feeds). Unlike ConnectRingLink it does not wait for that sender: the stride
// algorithms' receives wait for its frames, each within its own limit.
absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectStrideLink(const RingMember& me,
                                                            const RingNeighbours& neighbours,
                                                            std::shared_ptr<PeerInbox> inbox,
                                                            const WaitLimit& limit);

}  // namespace ringsync
