#include "daemon/transport/grpc/grpc_link.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/transport/tcp/socket_address.h"
#include "spdlog/spdlog.h"
#include "wire/grpc_options.h"
#include "wire/host_port.h"

namespace ringsync {
namespace {

// A channel to rank+1 by its name, or (`by_address`) at the address the coordinator saw
// it join from — with the name still the one its certificate must carry.
std::shared_ptr<grpc::Channel> NewPeerChannel(const RingNeighbours& neighbours,
                                              bool by_address = false) {
  grpc::ChannelArguments args = PeerChannelArguments(neighbours.keepalive);
  if (!by_address) return neighbours.security.CreateChannel(neighbours.next_target, args);
  if (absl::StatusOr<HostPort> named = ParseHostPort(neighbours.next_target, PortUse::kConnect);
      named.ok()) {
    args.SetSslTargetNameOverride(named->host);
  }
  return neighbours.security.CreateChannel(neighbours.fallback_target, args);
}

const char* DescribeChannelState(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "still resolving the name or connecting";
    case GRPC_CHANNEL_READY:
      return "connected, but the stream was not accepted";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "failed (the name did not resolve, or the connection was refused or dropped)";
    case GRPC_CHANNEL_SHUTDOWN:
      return "shut down";
  }
  return "unknown";
}

absl::StatusOr<OutboundEdge> OpenWithRetries(const RingMember& me,
                                             const RingNeighbours& neighbours,
                                             const WaitLimit& limit) {
  // One channel for the attempts while it is still resolving or connecting: a slow name
  // resolution goes on across attempts (outbound_stream.h, OpenOn); each attempt is a new
  // stream on it. A channel in TRANSIENT_FAILURE is waiting out gRPC's backoff instead,
  // which grows after each failed resolution (1 s, 1.6 s, 2.6 s, ... — a DNS answer lost
  // while a container network's DNS server reloads once cost 50 s): the next attempt
  // starts afresh on a new channel. So does one still not connected after
  // kStalledAttempts attempts: a TCP connection whose SYN was dropped (a container whose
  // network was still being set up) waits out gRPC's 20 s connect timeout, a lost DNS
  // query its resolver's timeout; a new channel (its own subchannel pool) asks and dials
  // anew. (A compose cluster's first ring once took 30 s to form that way.)
  //
  // With a fallback target, the new channel alternates between the name and the address
  // the coordinator saw rank+1 join from. A name lookup can hang for as long as the
  // resolver's retries last (20 s with two DNS servers that do not answer), and gRPC's
  // system resolver runs its lookups one after another on a few threads, so every new
  // channel's lookup waits behind the hung ones: a compose cluster whose DNS server
  // stopped answering while the trainers' containers started took 30 to 56 s to form its
  // ring, and its first collective timed out. The address needs no lookup (and its
  // ipv4:/ipv6: target never goes near the resolver's queue).
  constexpr int kStalledAttempts = 3;
  bool by_address = neighbours.fallback_first && !neighbours.fallback_target.empty();
  if (by_address) {
    spdlog::info("rank {} (generation {}): dialling {} at {}, the address it joined the "
                 "coordinator from, first: a link of this generation did not get through by name",
                 me.rank, me.generation, neighbours.next_description, neighbours.fallback_target);
  }
  std::shared_ptr<grpc::Channel> channel = NewPeerChannel(neighbours, by_address);
  int attempts = 0;
  int stalled = 0;  // consecutive attempts that ended with the channel not connected
  while (true) {
    const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/false);
    if (attempts > 0) stalled = state == GRPC_CHANNEL_READY ? 0 : stalled + 1;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || stalled >= kStalledAttempts) {
      by_address = !by_address && !neighbours.fallback_target.empty();
      // Said each time: a ring that takes long to form shows here which name or
      // connection held it up.
      spdlog::warn("rank {} (generation {}): {} has not answered {} attempt(s) to open a "
                   "stream (its connection {}); {}",
                   me.rank, me.generation, neighbours.next_description, attempts,
                   DescribeChannelState(state),
                   by_address ? absl::StrCat("dialling ", neighbours.fallback_target,
                                             ", the address it joined the coordinator from")
                              : std::string("resolving the name and connecting anew"));
      channel = NewPeerChannel(neighbours, by_address);
      stalled = 0;
    }
    WaitLimit attempt = limit;
    attempt.deadline = std::min(limit.deadline, SteadyDeadline(neighbours.open_attempt));
    absl::StatusOr<OutboundEdge> edge =
        OpenOutboundEdge(me, neighbours, channel, attempt, /*wait_for_ready=*/true);
    if (edge.ok()) edge->by_address = by_address;
    ++attempts;
    // Only an attempt that got no answer is worth making again; a refusal says why.
    if (edge.ok() || !absl::IsDeadlineExceeded(edge.status())) return edge;
    if (limit.deadline.Passed() ||
        (limit.cancellation != nullptr && limit.cancellation->IsCancelled())) {
      // Where the last attempt stood says whether the name, the connection or the peer
      // was missing.
      return absl::DeadlineExceededError(absl::StrCat(
          edge.status().message(), " (", attempts, " attempts; the last one's connection: ",
          DescribeChannelState(channel->GetState(/*try_to_connect=*/false)), ")"));
    }
  }
}

// The data connection `stream`'s receiver asked for, to the address the stream reached;
// null (the frames stay on the stream) when it cannot be made.
std::unique_ptr<RecordSender> ConnectData(const RingMember& me, const RingNeighbours& neighbours,
                                          OutboundStream& stream,
                                          const OutboundStream::DataOffer& offer,
                                          const WaitLimit& limit) {
  // Under mutual TLS the frames leave the encrypted stream only sealed.
  if (neighbours.security.tls() && !offer.seal.has_value()) {
    spdlog::warn("rank {} (generation {}): {} asked for a data connection without a seal key; "
                 "its frames go on the TLS stream",
                 me.rank, me.generation, neighbours.next_description);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<RecordSealer>> sealer =
      offer.seal.has_value() ? RecordSealer::Create(*offer.seal) : std::unique_ptr<RecordSealer>();
  absl::StatusOr<sockaddr_storage> address = AddressOfGrpcPeer(stream.peer_address(), offer.port);
  absl::StatusOr<UniqueFd> connection =
      !sealer.ok()    ? sealer.status()
      : address.ok()  ? ConnectDataConnection(*address, offer.key, limit)
                      : address.status();
  if (!connection.ok()) {
    spdlog::warn("rank {} (generation {}): no data connection to {} ({}); its frames go on the "
                 "gRPC stream",
                 me.rank, me.generation, neighbours.next_description,
                 std::string(connection.status().message()));
    return nullptr;
  }
  spdlog::info("rank {} (generation {}): frames to {} go on a{} data connection to {}", me.rank,
               me.generation, neighbours.next_description, offer.seal.has_value() ? " sealed" : "",
               DescribeAddress(*address));
  return std::make_unique<RecordSender>(*std::move(connection), *std::move(sealer));
}

}  // namespace

std::string FallbackTarget(absl::string_view target, absl::string_view observed_host) {
  const absl::StatusOr<HostPort> named = ParseHostPort(target, PortUse::kConnect);
  if (observed_host.empty() || !named.ok() || named->is_address()) return "";
  // The ipv4:/ipv6: schemes, not a bare address: gRPC would hand a bare one to its DNS
  // resolver, whose lookups (even of a numeric address) queue behind the hung ones.
  return absl::StrContains(observed_host, ':')
             ? absl::StrCat("ipv6:[", observed_host, "]:", named->port)
             : absl::StrCat("ipv4:", observed_host, ":", named->port);
}

absl::StatusOr<OutboundEdge> OpenOutboundEdge(const RingMember& me, const RingNeighbours& neighbours,
                                              std::shared_ptr<grpc::Channel> channel,
                                              const WaitLimit& limit, bool wait_for_ready) {
  PeerHello hello;
  hello.sender_rank = me.rank;
  hello.generation = me.generation;
  hello.worker_id = neighbours.worker_id;
  hello.stride = neighbours.stride;
  hello.data_connection = neighbours.offer_data;
  OutboundEdge edge;
  if (neighbours.offer_shm) {
    // A fresh ring per stream: slots the previous stream's receiver still holds stay its.
    absl::StatusOr<std::unique_ptr<SlotRingWriter>> slots = SlotRingWriter::Create(
        neighbours.shm_slots, neighbours.shm_slot_bytes, neighbours.shm_mailbox_bytes);
    if (slots.ok()) {
      hello.host = HostIdentity::Local();
      hello.shm_offer = (*slots)->offer();
      edge.slots = *std::move(slots);
    } else {
      spdlog::warn("rank {} (generation {}): no shared-memory slot ring for {} ({}); its "
                   "payload goes as gRPC bytes",
                   me.rank, me.generation, neighbours.next_description,
                   std::string(slots.status().message()));
    }
  }
  if (channel == nullptr) channel = NewPeerChannel(neighbours);
  absl::StatusOr<std::unique_ptr<OutboundStream>> stream = OutboundStream::OpenOn(
      std::move(channel), hello, neighbours.next_description, limit, wait_for_ready);
  if (!stream.ok()) return stream.status();
  edge.stream = *std::move(stream);
  if (!edge.stream->shm_accepted()) {
    edge.slots.reset();  // another host, or it declined
    if (const auto offer = edge.stream->data_offer(); offer.has_value()) {
      edge.data = ConnectData(me, neighbours, *edge.stream, *offer, limit);
    }
  } else {
    spdlog::info("rank {} (generation {}): segment payload to {} goes through a shared-memory "
                 "slot ring ({} slots of {} bytes){}",
                 me.rank, me.generation, neighbours.next_description, neighbours.shm_slots,
                 neighbours.shm_slot_bytes,
                 edge.stream->mailbox_accepted() ? ", frames through its frame mailbox" : "");
  }
  return edge;
}

absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectRingLink(const RingMember& me,
                                                          const RingNeighbours& neighbours,
                                                          std::shared_ptr<PeerInbox> inbox,
                                                          const WaitLimit& limit,
                                                          OutboundEdge* opened) {
  OutboundEdge outbound;
  if (opened != nullptr && opened->stream != nullptr && !opened->stream->broken()) {
    outbound = std::exchange(*opened, {});
  } else {
    if (opened != nullptr) *opened = {};
    absl::StatusOr<OutboundEdge> fresh = OpenWithRetries(me, neighbours, limit);
    if (!fresh.ok()) return fresh.status();
    outbound = *std::move(fresh);
  }
  absl::StatusOr<int> sender = inbox->AwaitSender(limit);
  if (!sender.ok()) {
    std::string kept;
    if (opened != nullptr) {
      *opened = std::move(outbound);
      kept = absl::StrCat(" (the stream to rank ", me.next(), " stays open)");
    }
    return absl::Status(sender.status().code(),
                        absl::StrCat("rank ", me.prev(), " did not connect its ring stream", kept,
                                     ": ", sender.status().message()));
  }
  if (*sender != me.prev()) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", me.generation, ": the incoming ring stream is from rank ",
                     *sender, ", but this rank's left neighbour is rank ", me.prev()));
  }
  return std::make_unique<GrpcLink>(me, neighbours, std::move(outbound), std::move(inbox));
}

absl::StatusOr<std::unique_ptr<GrpcLink>> ConnectStrideLink(const RingMember& me,
                                                            const RingNeighbours& neighbours,
                                                            std::shared_ptr<PeerInbox> inbox,
                                                            const WaitLimit& limit) {
  absl::StatusOr<OutboundEdge> outbound = OpenWithRetries(me, neighbours, limit);
  if (!outbound.ok()) return outbound.status();
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

absl::Status GrpcLink::ReadyStream(const Frame& frame, const WaitLimit& limit) {
  const bool segment = frame.kind != FrameKind::kAbort;  // part of the collective's stream
  if (outbound_->broken() || (data_ != nullptr && data_->broken())) {
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
    absl::StatusOr<OutboundEdge> reopened =
        OpenOutboundEdge(me_, neighbours_, by_address_ ? NewPeerChannel(neighbours_, true) : nullptr,
                         limit, /*wait_for_ready=*/false);
    if (!reopened.ok()) {
      return absl::Status(reopened.status().code(),
                          absl::StrCat("reconnecting: ", reopened.status().message()));
    }
    UseEdge(*std::move(reopened));
  }
  if (segment) streamed_sequence_ = frame.sequence;
  return absl::OkStatus();
}

absl::Status GrpcLink::SendOnStream(const Frame& frame, absl::Span<const std::byte> payload,
                                    const WaitLimit& limit) {
  if (absl::Status ready = ReadyStream(frame, limit); !ready.ok()) return ready;
  if (mailbox_active_) return SendThroughMailbox(frame, payload, limit);
  if (data_ != nullptr) return SendOnData(frame, payload, limit);
  if (slots_ != nullptr && frame.kind == FrameKind::kSegment && !payload.empty() &&
      payload.size() <= slots_->slot_bytes()) {
    // The same-host path: the payload into a slot, the header on the stream.
    absl::StatusOr<uint32_t> slot =
        slots_->Put(payload, limit, [this] { return outbound_->broken(); });
    if (!slot.ok()) return SendingTo(slot.status());
    absl::Status sent = outbound_->WriteFrame(frame, {}, limit, absl::Seconds(2),
                                              ShmPayloadRef{*slot, payload.size()});
    if (!sent.ok()) slots_->Unput(*slot);  // its header was not queued: nobody will take it
    return sent;
  }
  return outbound_->WriteFrame(frame, payload, limit);
}

void GrpcLink::PostSend(const Frame& frame, absl::Span<const std::byte> payload,
                        const WaitLimit& limit, SendDone done) {
  if (absl::Status ready = ReadyStream(frame, limit); !ready.ok()) {
    done(ready);
    return;
  }
  // A reopened stream may have brought the slot ring or a data connection, whose sends
  // wait for their receiver: such a frame goes the waiting way (posts_sends says no from
  // then on).
  if (shm_active_ || data_active_) {
    done(SendOnStream(frame, payload, limit));
    return;
  }
  outbound_->PostFrame(frame, payload, std::move(done));
}

absl::Status GrpcLink::SendingTo(const absl::Status& failed) const {
  return absl::Status(failed.code(), absl::StrCat("sending to ", neighbours_.next_description,
                                                  ": ", failed.message()));
}

void GrpcLink::UseEdge(OutboundEdge edge) {
  data_ = std::move(edge.data);  // before the stream it belongs to goes
  outbound_ = std::move(edge.stream);
  by_address_ = edge.by_address;
  slots_ = std::move(edge.slots);
  data_active_ = data_ != nullptr;
  shm_active_ = slots_ != nullptr;
  mailbox_active_ = slots_ != nullptr && slots_->mailbox() != nullptr &&
                    outbound_ != nullptr && outbound_->mailbox_accepted();
}

absl::Status GrpcLink::SendThroughMailbox(const Frame& frame, absl::Span<const std::byte> payload,
                                          const WaitLimit& limit) {
  FrameMailboxWriter& mailbox = *slots_->mailbox();
  auto gone = [this] { return outbound_->broken(); };
  std::optional<uint32_t> slot;
  bool recordable = true;  // as a mailbox record: `head`, then `inline_payload`
  std::string head;
  absl::Span<const std::byte> inline_payload;
  if (payload.size() <= kMailboxInlinePayloadBytes) {
    head = FrameHead(frame, payload.size());
    inline_payload = payload;
  } else if ((frame.kind == FrameKind::kSegment || frame.kind == FrameKind::kRelay) &&
             payload.size() <= slots_->slot_bytes()) {
    absl::StatusOr<uint32_t> put = slots_->Put(payload, limit, gone);
    if (!put.ok()) return SendingTo(put.status());
    slot = *put;
    head = ShmFrameBytes(frame, ShmPayloadRef{*slot, payload.size()});
  } else {
    recordable = false;
  }
  if (recordable && head.size() + inline_payload.size() <= mailbox.max_record_bytes()) {
    const absl::Span<const std::byte> pieces[] = {
        {reinterpret_cast<const std::byte*>(head.data()), head.size()}, inline_payload};
    // An abort may use the mailbox's reserve: its receiver may have stopped reading.
    absl::Status put = mailbox.Put(pieces, limit, gone, frame.kind == FrameKind::kAbort);
    if (!put.ok() && slot.has_value()) slots_->Unput(*slot);  // nobody will take it
    return put.ok() ? put : SendingTo(put);
  }
  if (slot.has_value()) slots_->Unput(*slot);
  // Too large for the mailbox (a forced relay of a large buffer): the frame goes on the
  // stream, and an empty record tells the receiver to take it from there now.
  if (absl::Status sent = outbound_->WriteFrame(frame, payload, limit); !sent.ok()) return sent;
  const absl::Status put = mailbox.Put({}, limit, gone);
  return put.ok() ? put : SendingTo(put);
}

absl::Status GrpcLink::SendOnData(const Frame& frame, absl::Span<const std::byte> payload,
                                  const WaitLimit& limit) {
  const std::string head = FrameHead(frame, payload.size());
  const absl::Span<const std::byte> pieces[] = {
      {reinterpret_cast<const std::byte*>(head.data()), head.size()}, payload};
  // A segment is sent by the ring's sending thread while its receiver reads (send_queue.h):
  // it may wait for room. Any other frame may be one a rank sends before it reads (a
  // relay's, a stride link's), which the connection must hold unread.
  const RecordPacing pacing =
      frame.kind == FrameKind::kSegment ? RecordPacing::kPaced : RecordPacing::kQueued;
  absl::Status sent =
      data_->Send(pieces, limit, [this] { return outbound_->broken(); }, pacing);
  if (sent.ok()) return sent;
  // Part of the frame may have gone: the receiver must see this connection and its stream
  // end (as a broken stream's), not read on past a torn record.
  data_->Close();
  outbound_->GiveUp();
  return SendingTo(sent);
}

}  // namespace ringsync
