// OutboundStream: this rank's RingStream to its right neighbour, as a gRPC callback
// reactor with exactly one write in flight (natural back-pressure). Frames are written
// zero-copy: the payload slice points at the caller's memory, and WriteFrame returns
// only once gRPC has released it.
//
// Thread-safety: one thread writes at a time; the destructor may run on any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/ring/link.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace ringsync {

// Set by a payload slice's release hook; shared because gRPC may release it late.
struct ReleaseLatch {
  absl::Mutex mu;
  bool released ABSL_GUARDED_BY(mu) = false;
};

class OutboundStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Connects to `target`, sends `hello`, and waits within `limit` for the peer to accept.
  // `peer` describes the receiver for messages, e.g. "rank 2 (worker w2 at 10.0.0.3:7401)".
  static absl::StatusOr<std::unique_ptr<OutboundStream>> Open(const std::string& target,
                                                              const PeerHello& hello,
                                                              const std::string& peer,
                                                              const WaitLimit& limit);
  ~OutboundStream() override;

  // Sends one frame. On cancellation or deadline while gRPC still holds the payload,
  // waits `grace` for the write to finish, else cancels the whole stream (which then
  // fails every later write) — it never returns while gRPC may still read `payload`.
  absl::Status WriteFrame(const Frame& frame, absl::Span<const std::byte> payload,
                          const WaitLimit& limit, absl::Duration grace = absl::Seconds(2));

  // True once the stream ended or a write failed: nothing more can be sent on it.
  bool broken() const {
    absl::MutexLock lock(&mu_);
    return done_ || !write_ok_;
  }

  // Half-closes the stream and waits (bounded) for the peer to finish it.
  void Close(absl::Duration wait);

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWritesDoneDone(bool /*ok*/) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  OutboundStream(std::shared_ptr<grpc::Channel> channel, std::string peer);

  absl::Status Broken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AwaitRelease(ReleaseLatch& latch, const WaitLimit& limit);

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  const std::string peer_;
  grpc::ByteBuffer ack_buffer_;
  grpc::ByteBuffer write_buffer_;

  mutable absl::Mutex mu_;
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
