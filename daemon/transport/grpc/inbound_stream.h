// InboundStream: the gRPC reactor of one incoming RingStream. It expects a hello first,
// attaches to the PeerInbox of the hello's generation, then decodes each message into a
// frame for the inbox, reading one message at a time so the inbox's capacity is the
// back-pressure.
//
// How operations start (gRPC allows one outstanding read and one outstanding write per
// call, and Finish once; anything more aborts the process with
// GRPC_CALL_ERROR_TOO_MANY_OPERATIONS, and a Write racing a Finish can send the initial
// metadata twice). Three parties start operations: gRPC's reactions, the inbox (resume
// reading, end the stream) and a newer stream replacing this one. All of them go
// through the Ops object below, under its one mutex:
//  * a read starts only when none is outstanding and the stream is not finished; its
//    buffer is taken out under the mutex when it completes, so a read started right after
//    never shares a buffer with the message being decoded;
//  * the one write (the acceptance) starts only before Finish;
//  * Finish happens once, and waits behind a write in flight: it is issued by the write's
//    completion instead.
// After OnDone nothing starts: the call is gone.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/shm/slot_ring.h"
#include "daemon/transport/grpc/peer_inbox.h"
#include "daemon/transport/tcp/data_key.h"
#include "daemon/transport/tcp/record_seal.h"
#include "daemon/transport/tcp/data_listener.h"
#include "wire/security/peer_identity.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"

namespace ringsync {

class InboxRegistry;
struct HelloPolicy;

class InboundStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `identity`: what the caller's certificate proved; `policy` outlives the stream.
  InboundStream(InboxRegistry& registry, std::string peer, PeerIdentity identity,
                const HelloPolicy& policy);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // Starts the reactor's operations under the rules above. It outlives the reactor (the
  // inbox holds it as its feeder), so the inbox may call it after gRPC ended the call.
  class Ops final : public InboxFeeder {
   public:
    explicit Ops(InboundStream* stream) : stream_(stream) {}
    void ResumeReading() override;
    void EndStream(const absl::Status& status) override;

    // Writes `message` unless the stream is finishing (then it is dropped).
    void Write(grpc::ByteBuffer message);
    // The read completed: hands out what it read.
    grpc::ByteBuffer ReadCompleted();
    void WriteCompleted();
    void StreamGone();
    // The stream's frames come on its data connection from now on.
    void MarkDataConnected() { data_connected_ = true; }
    bool data_connected() const { return data_connected_; }

   private:
    absl::Mutex mu_;
    InboundStream* stream_ ABSL_GUARDED_BY(mu_);  // null after OnDone
    grpc::ByteBuffer read_buffer_ ABSL_GUARDED_BY(mu_);
    grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);
    bool read_outstanding_ ABSL_GUARDED_BY(mu_) = false;
    bool write_outstanding_ ABSL_GUARDED_BY(mu_) = false;
    bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // EndStream was called
    std::optional<grpc::Status> deferred_finish_ ABSL_GUARDED_BY(mu_);  // behind the write
    std::atomic<bool> data_connected_{false};
  };

  void AcceptHello(const struct PeerHello& hello);
  // Maps the slot ring `hello` offers when policy and host allow; null otherwise (the
  // stream then carries payload as gRPC bytes).
  std::shared_ptr<SlotRingReader> MapOfferedSlots(const struct PeerHello& hello);
  // What the sender is given for its data connection: the key it presents on it, and
  // (under mutual TLS) the key that seals its records.
  struct DataKeys {
    DataKey key;
    std::optional<RecordSealKey> seal;
  };
  // Asks for the data connection `hello` offers when policy allows: its keys, or nullopt
  // (its frames then come on the stream).
  std::optional<DataKeys> ExpectDataConnection(const struct PeerHello& hello);
  void Fail(const absl::Status& status);
  // Ends the stream with `status`, counted as a refusal under `reason`.
  void Refuse(absl::string_view reason, const absl::Status& status);

  InboxRegistry& registry_;
  const std::string peer_;  // the remote address, for messages
  const PeerIdentity identity_;
  const HelloPolicy& policy_;
  std::shared_ptr<Ops> ops_;
  // Touched by OnReadDone only: gRPC runs one reaction of a kind at a time.
  std::shared_ptr<PeerInbox> inbox_;  // set once the hello is accepted
  // The sender's slot ring, mapped when its hello offered one and it is on this host.
  std::shared_ptr<SlotRingReader> slots_;
  std::string sender_;                // "rank 2 (worker w2)"
  bool frame_received_ = false;       // a frame came after the hello
  std::optional<DataKey> data_key_;   // handed to the sender; revoked when the stream ends
  std::shared_ptr<DataListener> data_listener_;  // that handed out data_key_
};

}  // namespace ringsync
