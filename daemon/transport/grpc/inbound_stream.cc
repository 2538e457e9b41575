#include "daemon/transport/grpc/inbound_stream.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "daemon/transport/grpc/peer_service.h"
#include "ringsync/v1/peer.pb.h"

namespace ringsync {
namespace {


}  // namespace

void InboundStream::Handle::ResumeReading() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (stream_ == nullptr || finished_ || read_outstanding_) return;
  read_outstanding_ = true;
  stream_->StartRead(&stream_->read_buffer_);
}

void InboundStream::Handle::EndStream(const absl::Status& status) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (stream_ == nullptr || finished_) return;
  finished_ = true;
  stream_->Finish(ToGrpc(status));
}

void InboundStream::Handle::ReadCompleted() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  read_outstanding_ = false;
}

void InboundStream::Handle::StreamGone() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  stream_ = nullptr;
}

InboundStream::InboundStream(InboxRegistry& registry, std::string peer)
    : registry_(registry), peer_(std::move(peer)), handle_(std::make_shared<Handle>(this)) {
  handle_->ResumeReading();
}

void InboundStream::OnReadDone(bool ok) {
  handle_->ReadCompleted();
  if (!ok) {
    // The sender half-closed or its process died: no more frames will come.
    if (inbox_ != nullptr) {
      inbox_->Detach(handle_.get(), absl::UnavailableError(
          absl::StrCat("the ring stream from ", sender_, " at ", peer_, " closed")));
    }
    handle_->EndStream(absl::OkStatus());
    return;
  }
  absl::StatusOr<DecodedMessage> message = DecodeMessage(read_buffer_);
  read_buffer_.Clear();
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
  if (inbox_->Push(std::move(message->frame))) handle_->ResumeReading();
}

void InboundStream::AcceptHello(const PeerHello& hello) {
  sender_ = absl::StrCat("rank ", hello.sender_rank, " (worker ", hello.worker_id, ")");
  absl::StatusOr<std::shared_ptr<PeerInbox>> inbox = registry_.Get(hello.generation);
  if (!inbox.ok()) {
    handle_->EndStream(inbox.status());
    return;
  }
  if (absl::Status s = (*inbox)->Attach(handle_, hello.sender_rank, hello.worker_id); !s.ok()) {
    handle_->EndStream(s);
    return;
  }
  inbox_ = *std::move(inbox);
  v1::PeerAck ack;
  ack.set_accepted(true);
  grpc::Slice slice(ack.SerializeAsString());
  ack_buffer_ = grpc::ByteBuffer(&slice, 1);
  StartWrite(&ack_buffer_);
  handle_->ResumeReading();
}

void InboundStream::Fail(const absl::Status& status) {
  if (inbox_ != nullptr) {
    inbox_->Detach(handle_.get(), absl::Status(status.code(),
                                absl::StrCat("the ring stream from ", sender_, " broke: ",
                                             status.message())));
  }
  handle_->EndStream(status);
}

void InboundStream::OnDone() {
  handle_->StreamGone();
  if (inbox_ != nullptr) {
    inbox_->Detach(handle_.get(), absl::UnavailableError(
        absl::StrCat("the ring stream from ", sender_, " at ", peer_, " ended")));
  }
  delete this;
}

}  // namespace ringsync
