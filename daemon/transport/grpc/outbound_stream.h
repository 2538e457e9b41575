// OutboundStream: this rank's RingStream to its right neighbour, as a gRPC callback
// reactor with exactly one write in flight (natural back-pressure). Frames are written
// zero-copy: the payload slice points at the caller's memory, and WriteFrame returns
// only once gRPC has released it — except small frames other than aborts (header-only
// ones and payloads up to 64 KiB), which are copied and queued behind the write in flight
// so that WriteFrame returns at once (a bounded queue; a broken stream loses what it still
// held, as it may lose a frame already written). PostFrame queues a frame zero-copy
// without waiting at all and reports when it is out (PostedWrite): the next queued frame
// is started by the previous one's completion, on gRPC's thread.
//
// How operations start (gRPC allows one outstanding read and one outstanding write per
// call; a second one aborts the process with GRPC_CALL_ERROR_TOO_MANY_OPERATIONS):
//  * every StartWrite/StartRead/StartCall happens under mu_;
//  * WriteFrame starts writes from outside the reactions, which gRPC allows only while
//    the reactor holds the call open (AddHold): without the hold the call can end, and
//    its state be freed, between its last reaction and OnDone. The hold is taken in Open
//    and released exactly once (ReleaseHoldLocked) when nothing more will be sent — the
//    peer ended the stream, a write failed, or the destructor runs; no write starts after;
//  * a write starts only when none is in flight (write_in_flight_); OnWriteDone starts the
//    next queued small frame. The hello counts: the
//    peer's acceptance can arrive before the hello's own OnWriteDone, so the first frame
//    waits for it like any other;
//  * the read is started once in Open and re-armed only in its own completion.
// gRPC runs these reactions on its own threads, never inline inside a Start call, so
// starting under mu_ cannot deadlock with a reaction taking mu_.
//
// Thread-safety: one thread writes at a time; the destructor may run on any thread.
#pragma once

#include "wire/security/transport_security.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/link/link.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "daemon/transport/grpc/posted_write.h"
#include "daemon/transport/tcp/data_key.h"
#include "daemon/transport/tcp/record_seal.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "wire/grpc_options.h"

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
  // `security`: how the connection authenticates (plain TCP by default); `keepalive`:
  // how a silent peer is noticed. `wait_for_ready`: wait within `limit` for a neighbour
  // that is not listening yet (still starting); without it a refused connection fails
  // at once (Unavailable) — a neighbour of the same generation that stopped listening is
  // dead, and waiting for it only delays the failure.
  static absl::StatusOr<std::unique_ptr<OutboundStream>> Open(
      const std::string& target, const PeerHello& hello, const std::string& peer,
      const WaitLimit& limit, const TransportSecurity& security = TransportSecurity(),
      const KeepaliveSettings& keepalive = {}, bool wait_for_ready = true);
  // As Open, on a channel the caller made (PeerChannelArguments) and may open on again:
  // attempts that share one channel share its name resolution and connection backoff,
  // where a new channel per attempt would start both over (and a slow resolver, e.g. a
  // container engine's DNS that drops queries while containers start, would then never
  // answer within one attempt).
  static absl::StatusOr<std::unique_ptr<OutboundStream>> OpenOn(
      std::shared_ptr<grpc::Channel> channel, const PeerHello& hello, const std::string& peer,
      const WaitLimit& limit, bool wait_for_ready = true);
  ~OutboundStream() override;

  // Sends one frame. On cancellation or deadline while gRPC still holds the payload,
  // waits `grace` for the write to finish, else cancels the whole stream (which then
  // fails every later write) — it never returns while gRPC may still read `payload`.
  // Small frames return once queued (see above). With `shm` the payload is in the
  // sender's slot ring (`payload` must be empty): only the header travels, queued like a
  // small frame; an error then means the header was not queued.
  absl::Status WriteFrame(const Frame& frame, absl::Span<const std::byte> payload,
                          const WaitLimit& limit, absl::Duration grace = absl::Seconds(2),
                          std::optional<ShmPayloadRef> shm = std::nullopt);

  // Queues `frame` zero-copy behind every frame before it and returns at once; `done` runs
  // once it is out and gRPC let go of `payload`, or with why it is not (see SendDone).
  void PostFrame(const Frame& frame, absl::Span<const std::byte> payload, SendDone done);
  // Cancels the stream: every posted frame not yet out fails, and nothing reads its
  // payload any more. The stream is broken from then on.
  void GiveUp() { context_.TryCancel(); }

  // Whether the receiver mapped the slot ring the hello offered (PeerAck.shm_accepted).
  bool shm_accepted() const {
    absl::MutexLock lock(&mu_);
    return shm_accepted_;
  }
  // Whether it also reads the ring's frame mailbox (PeerAck.mailbox_accepted).
  bool mailbox_accepted() const {
    absl::MutexLock lock(&mu_);
    return mailbox_accepted_;
  }

  // The data connection the receiver asked for (PeerAck.data_port), or nullopt.
  struct DataOffer {
    int port = 0;
    DataKey key{};
    std::optional<RecordSealKey> seal;  // PeerAck.data_seal_key: its records are sealed
  };
  std::optional<DataOffer> data_offer() const {
    absl::MutexLock lock(&mu_);
    return data_offer_;
  }
  // The address the stream reached, as gRPC names it ("ipv4:198.18.0.3:7401").
  std::string peer_address() { return context_.peer(); }

  // True once the stream ended or a write failed: nothing more can be sent on it.
  bool broken() const {
    absl::MutexLock lock(&mu_);
    return !holding_;
  }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  OutboundStream(std::shared_ptr<grpc::Channel> channel, std::string peer);

  // Why nothing more can be sent, naming the peer's reason once the call is done.
  absl::Status Broken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `write_buffer_` as the one write in flight.
  // REQUIRES: mu_ held, no write in flight, the call not done.
  void StartWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the first queued small frame if no write is in flight and the stream stands.
  void StartQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WriteFrame for a small frame: copies it into the queue, waiting within `limit` for room.
  absl::Status QueueFrame(const Frame& frame, absl::Span<const std::byte> payload,
                          const WaitLimit& limit);
  // Queues an encoded frame that holds none of the caller's memory.
  absl::Status QueueEncoded(grpc::ByteBuffer encoded, const WaitLimit& limit);
  // How a written frame's payload came back from gRPC. Only kReleased means the frame
  // is on its way; otherwise the stream ended with it possibly undelivered.
  enum class Release { kReleased, kGivenUp /* this stream cancelled at the limit */, kStreamEnded };
  // Waits until gRPC releases a written frame's payload, cancelling the stream if that
  // takes past `limit`.
  Release AwaitRelease(ReleaseLatch& latch, const WaitLimit& limit);

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  const std::string peer_;
  grpc::ByteBuffer ack_buffer_;  // the read in flight; touched by OnReadDone only

  mutable absl::Mutex mu_;
  grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);  // owned by gRPC while a write is in flight
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  bool shm_accepted_ ABSL_GUARDED_BY(mu_) = false;
  bool mailbox_accepted_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<DataOffer> data_offer_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // Encoded frames waiting to be written: small ones with their own copy of the payload
  // (at most kMaxQueuedFrames of those), posted ones pointing at the poster's.
  struct QueuedWrite {
    grpc::ByteBuffer buffer;
    std::shared_ptr<PostedWrite> posted;  // null: a copied frame
  };
  std::deque<QueuedWrite> queued_ ABSL_GUARDED_BY(mu_);
  size_t queued_copies_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<PostedWrite> writing_ ABSL_GUARDED_BY(mu_);  // the posted frame in flight
  // Posted frames whose outcome may still be unknown, finished by OnDone at the latest.
  std::vector<std::shared_ptr<PostedWrite>> posted_ ABSL_GUARDED_BY(mu_);
  // The call is held open (see AddHold above). Released once the stream cannot carry
  // another frame, so it is also what "broken" means.
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
