#include "daemon/transport/grpc/inbound_stream.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "wire/grpc_status.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "daemon/transport/grpc/peer_service.h"
#include "wire/security/peer_identity.h"
#include "wire/reaction_order.h"
#include "ringsync/v1/peer.pb.h"

namespace ringsync {

void InboundStream::Ops::ResumeReading() {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr || finishing_ || read_outstanding_) return;
  read_outstanding_ = true;
  stream_->StartRead(&read_buffer_);
}

void InboundStream::Ops::EndStream(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr || finishing_) return;
  finishing_ = true;
  if (write_outstanding_) {
    deferred_finish_ = ToGrpc(status);  // WriteCompleted finishes
    return;
  }
  stream_->Finish(ToGrpc(status));
}

void InboundStream::Ops::Write(grpc::ByteBuffer message) {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr || finishing_ || write_outstanding_) return;
  write_outstanding_ = true;
  write_buffer_ = std::move(message);
  stream_->StartWrite(&write_buffer_);
}

grpc::ByteBuffer InboundStream::Ops::ReadCompleted() {
  absl::MutexLock lock(&mu_);
  read_outstanding_ = false;
  grpc::ByteBuffer message;
  message.Swap(&read_buffer_);
  return message;
}

void InboundStream::Ops::WriteCompleted() {
  absl::MutexLock lock(&mu_);
  write_outstanding_ = false;
  write_buffer_.Clear();
  if (deferred_finish_.has_value() && stream_ != nullptr) {
    stream_->Finish(*std::move(deferred_finish_));
    deferred_finish_.reset();
  }
}

void InboundStream::Ops::StreamGone() {
  absl::MutexLock lock(&mu_);
  stream_ = nullptr;
}

InboundStream::InboundStream(InboxRegistry& registry, std::string peer, PeerIdentity identity,
                             const HelloPolicy& policy)
    : registry_(registry),
      peer_(std::move(peer)),
      identity_(std::move(identity)),
      policy_(policy),
      ops_(std::make_shared<Ops>(this)) {
  HandToGrpc(this);
  ops_->ResumeReading();
}

void InboundStream::OnReadDone(bool ok) {
  InReaction(this);
  grpc::ByteBuffer read = ops_->ReadCompleted();
  if (!ok) {
    // The sender half-closed or its process died: no more frames will come.
    if (inbox_ != nullptr) {
      inbox_->Detach(ops_.get(), absl::UnavailableError(
          absl::StrCat("the ring stream from ", sender_, " at ", peer_, " closed")));
    }
    ops_->EndStream(absl::OkStatus());
    return;
  }
  absl::StatusOr<DecodedMessage> message = DecodeMessage(read);
  if (!message.ok()) {
    Fail(absl::Status(message.status().code(),
                      absl::StrCat(message.status().message(), " (from ", peer_, ")")));
    return;
  }
  if (inbox_ == nullptr) {
    if (!message->is_hello) {
      Fail(absl::InvalidArgumentError("a ring stream must open with a hello frame"));
      return;
    }
    AcceptHello(message->hello);
    return;
  }
  if (message->is_hello) {
    Fail(absl::InvalidArgumentError("a second hello on an open ring stream"));
    return;
  }
  if (ops_->data_connected()) {
    // Frames on two paths would have no order between them.
    Fail(absl::InvalidArgumentError("a frame on a ring stream whose frames come on its data connection"));
    return;
  }
  if (message->shm.has_value()) {
    // The payload is in the sender's slot ring: only a stream whose ring was mapped may
    // name a slot, and only one inside it.
    if (slots_ == nullptr) {
      Fail(absl::InvalidArgumentError("a frame names a shared-memory slot on a stream without "
                                      "a slot ring"));
      return;
    }
    absl::StatusOr<SlotRingReader::Payload> payload =
        slots_->Take(message->shm->slot, message->shm->bytes);
    if (!payload.ok()) {
      Fail(payload.status());
      return;
    }
    message->frame.payload = payload->bytes;
    message->frame.storage = std::move(payload->storage);
  }
  // Before Push: once the frame is queued, a Pop on another thread may start the next
  // read, whose reaction can run before this one returns.
  const bool first_on_stream = !frame_received_;
  frame_received_ = true;
  absl::StatusOr<bool> room = inbox_->Push(std::move(message->frame), first_on_stream);
  if (!room.ok()) {
    if (policy_.refusals) {
      policy_.refusals("frame_out_of_sequence",
                       absl::StrCat(room.status().message(), " (from ", peer_, ")"));
    }
    Fail(room.status());
    return;
  }
  if (*room) ops_->ResumeReading();
}

void InboundStream::AcceptHello(const PeerHello& hello) {
  sender_ = DescribeSender(hello.sender_rank, hello.worker_id);
  // A hijack: a caller with a valid certificate for one worker claims to be another.
  if (absl::Status s = CheckClaimedWorker(identity_, hello.worker_id, policy_.require_certificates);
      !s.ok()) {
    Refuse("peer_hello_identity_mismatch", s);
    return;
  }
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox =
      registry_.ForHello(hello.generation, hello.sender_rank, hello.stride);
  if (!inbox.ok()) {
    if (absl::IsResourceExhausted(inbox.status())) {
      Refuse("generation_ahead", inbox.status());
    } else if (absl::IsPermissionDenied(inbox.status())) {
      Refuse("peer_hello_not_in_view", inbox.status());
    } else {
      ops_->EndStream(inbox.status());
    }
    return;
  }
  if (absl::Status s = (*inbox)->Attach(ops_, hello.sender_rank, hello.worker_id); !s.ok()) {
    if (absl::IsPermissionDenied(s)) {
      Refuse("peer_hello_not_in_view", s);
    } else {
      ops_->EndStream(s);
    }
    return;
  }
  inbox_ = *std::move(inbox);
  slots_ = MapOfferedSlots(hello);
  // Before the acceptance: the sender's first frame may follow it at once.
  const bool mailbox = slots_ != nullptr && slots_->mailbox() != nullptr;
  if (mailbox) inbox_->AttachMailbox(ops_.get(), slots_);
  // From here the inbox may end the stream at any moment (its generation retired, a newer
  // stream from the same sender): Ops then drops the acceptance or finishes after it.
  v1::PeerAck ack;
  ack.set_accepted(true);
  ack.set_shm_accepted(slots_ != nullptr);
  ack.set_mailbox_accepted(mailbox);
  if (slots_ == nullptr) {
    if (const std::optional<DataKeys> keys = ExpectDataConnection(hello); keys.has_value()) {
      ack.set_data_port(static_cast<uint32_t>(policy_.data_listener->port()));
      ack.set_data_key(DataKeyBytes(keys->key));
      if (keys->seal.has_value()) ack.set_data_seal_key(RecordSealKeyBytes(*keys->seal));
    }
  }
  grpc::Slice slice(ack.SerializeAsString());
  ops_->Write(grpc::ByteBuffer(&slice, 1));
  ops_->ResumeReading();
}

std::shared_ptr<SlotRingReader> InboundStream::MapOfferedSlots(const PeerHello& hello) {
  // Only now, with the sender authenticated and named by the view, is its offer looked at.
  if (!policy_.accept_shm || !hello.shm_offer.has_value() || !hello.host.has_value() ||
      !HostIdentity::Local().SameHostAs(*hello.host)) {
    return nullptr;
  }
  absl::StatusOr<std::shared_ptr<SlotRingReader>> slots =
      SlotRingReader::Attach(*hello.shm_offer, ::getuid());
  if (!slots.ok()) {
    spdlog::warn("the ring stream from {} offered a shared-memory slot ring that cannot be "
                 "used ({}); its payload comes as gRPC bytes",
                 sender_, std::string(slots.status().message()));
    return nullptr;
  }
  return *std::move(slots);
}

std::optional<InboundStream::DataKeys> InboundStream::ExpectDataConnection(const PeerHello& hello) {
  if (!hello.data_connection || policy_.data_listener == nullptr) return std::nullopt;
  std::optional<RecordSealKey> seal;
  if (policy_.seal_data_connections) {
    absl::StatusOr<RecordSealKey> made = NewRecordSealKey();
    if (!made.ok()) {
      spdlog::warn("the ring stream from {}: {}", sender_, std::string(made.status().message()));
      return std::nullopt;
    }
    seal = *made;
  }
  std::weak_ptr<Ops> ops = ops_;
  absl::StatusOr<DataKey> key = policy_.data_listener->Expect(
      [ops, inbox = inbox_, sender = sender_, seal,
       max_record_bytes = policy_.max_data_record_bytes](UniqueFd connection) {
        std::shared_ptr<Ops> stream = ops.lock();
        if (stream == nullptr) return;  // it ended: the connection closes unread
        absl::StatusOr<std::unique_ptr<RecordOpener>> opener =
            seal.has_value() ? RecordOpener::Create(*seal) : std::unique_ptr<RecordOpener>();
        absl::StatusOr<std::unique_ptr<IncomingRecords>> records =
            opener.ok() ? IncomingRecords::Adopt(std::move(connection), max_record_bytes,
                                                 *std::move(opener))
                        : opener.status();
        if (!records.ok()) {
          spdlog::warn("the data connection of the ring stream from {}: {}", sender,
                       std::string(records.status().message()));
          return;
        }
        stream->MarkDataConnected();
        inbox->AttachData(stream.get(), *std::move(records));
      });
  if (!key.ok()) {
    spdlog::warn("the ring stream from {}: {}", sender_, std::string(key.status().message()));
    return std::nullopt;
  }
  data_key_ = *key;
  data_listener_ = policy_.data_listener;
  return DataKeys{*key, seal};
}

void InboundStream::Refuse(absl::string_view reason, const absl::Status& status) {
  if (policy_.refusals) {
    policy_.refusals(reason, absl::StrCat("ring stream from ", peer_, ": ", status.message()));
  }
  ops_->EndStream(status);
}

void InboundStream::Fail(const absl::Status& status) {
  if (inbox_ != nullptr) {
    inbox_->Detach(ops_.get(), absl::Status(status.code(),
                                absl::StrCat("the ring stream from ", sender_, " broke: ",
                                             status.message())));
  }
  ops_->EndStream(status);
}

void InboundStream::OnWriteDone(bool /*ok*/) {
  InReaction(this);
  ops_->WriteCompleted();
}

void InboundStream::OnDone() {
  InReaction(this);
  ops_->StreamGone();
  if (data_key_.has_value()) data_listener_->Revoke(*data_key_);
  if (inbox_ != nullptr) {
    inbox_->Detach(ops_.get(), absl::UnavailableError(
        absl::StrCat("the ring stream from ", sender_, " at ", peer_, " ended")));
  }
  delete this;
}

}  // namespace ringsync
