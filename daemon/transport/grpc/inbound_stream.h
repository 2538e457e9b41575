// InboundStream: the gRPC reactor of one incoming RingStream. It expects a hello first,
// attaches to the PeerInbox of the hello's generation, then decodes each message into a
// frame for the inbox, reading one message at a time so the inbox's capacity is the
// back-pressure.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "daemon/transport/grpc/peer_inbox.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"

namespace ringsync {

class InboxRegistry;

class InboundStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  InboundStream(InboxRegistry& registry, std::string peer);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool /*ok*/) override {}
  void OnDone() override;

 private:
  // Lets the inbox resume reading or end the stream without owning the reactor, whose
  // life gRPC ends in OnDone. Recursive: gRPC may run a callback inline.
  class Handle final : public InboxFeeder {
   public:
    explicit Handle(InboundStream* stream) : stream_(stream) {}
    void ResumeReading() override;
    void EndStream(const absl::Status& status) override;
    void ReadCompleted();
    void StreamGone();

   private:
    std::recursive_mutex mu_;
    InboundStream* stream_;  // null after OnDone
    bool read_outstanding_ = false;
    bool finished_ = false;
  };

  void AcceptHello(const struct PeerHello& hello);
  void Fail(const absl::Status& status);

  InboxRegistry& registry_;
  const std::string peer_;  // the remote address, for messages
  std::shared_ptr<Handle> handle_;
  std::shared_ptr<PeerInbox> inbox_;  // set once the hello is accepted
  std::string sender_;                // "rank 2 (worker w2)"
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer ack_buffer_;
};

}  // namespace ringsync
