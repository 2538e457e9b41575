#include "daemon/transport/grpc/outbound_stream.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/grpc_options.h"
#include "wire/reaction_order.h"
#include "ringsync/v1/peer.pb.h"

namespace ringsync {
namespace {

constexpr char kRingStreamMethod[] = "/ringsync.v1.Peer/RingStream";

// Frames whose payload is at most this are copied and queued (WriteFrame returns at once)
// instead of written zero-copy with a wait for gRPC's completion: for a small frame the
// copy is nothing, while waiting for OnWriteDone costs a thread wake-up (~0.2 ms on a
// loaded machine) on every hop of a small collective's critical path.
constexpr size_t kQueuedPayloadBytes = 64 << 10;
// At most this many copied frames wait behind the write in flight; a writer beyond it
// waits (back-pressure, as for a zero-copy frame). Bounds the copies to 4 MiB.
constexpr size_t kMaxQueuedFrames = 64;

// Waits on `mu` for `cond` until `deadline` (or the limit's cancellation); true if it holds.
bool WaitUntil(absl::Mutex& mu, const absl::Condition& cond, SteadyDeadline deadline,
               const WaitLimit* limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  const WaitLimit bounded{deadline, limit != nullptr ? limit->cancellation : nullptr};
  return AwaitWithLimit(mu, cond, bounded, "ring stream").ok();
}

}  // namespace

OutboundStream::OutboundStream(std::shared_ptr<grpc::Channel> channel, std::string peer)
    : channel_(std::move(channel)), stub_(channel_), peer_(std::move(peer)) {}

absl::StatusOr<std::unique_ptr<OutboundStream>> OutboundStream::Open(const std::string& target,
                                                                     const PeerHello& hello,
                                                                     const std::string& peer,
                                                                     const WaitLimit& limit,
                                                                     const TransportSecurity& security,
                                                                     const KeepaliveSettings& keepalive,
                                                                     bool wait_for_ready) {
  return OpenOn(security.CreateChannel(target, PeerChannelArguments(keepalive)), hello, peer,
                limit, wait_for_ready);
}

absl::StatusOr<std::unique_ptr<OutboundStream>> OutboundStream::OpenOn(
    std::shared_ptr<grpc::Channel> channel, const PeerHello& hello, const std::string& peer,
    const WaitLimit& limit, bool wait_for_ready) {
  std::unique_ptr<OutboundStream> stream(new OutboundStream(std::move(channel), peer));
  OutboundStream& s = *stream;
  s.context_.set_wait_for_ready(wait_for_ready);
  s.stub_.PrepareBidiStreamingCall(&s.context_, kRingStreamMethod, grpc::StubOptions(), &s);

  absl::MutexLock lock(&s.mu_);
  s.StartRead(&s.ack_buffer_);
  s.write_buffer_ = EncodeHello(hello);
  s.StartWriteLocked();
  s.AddHold();  // WriteFrame starts writes from outside the reactions
  s.holding_ = true;
  HandToGrpc(&s);
  s.StartCall();
  auto answered = [&s]() ABSL_SHARED_LOCKS_REQUIRED(s.mu_) { return s.accepted_ || s.done_; };
  if (!WaitUntil(s.mu_, absl::Condition(&answered), limit.deadline, &limit)) {
    return absl::DeadlineExceededError(
        absl::StrCat("connecting the ring stream to ", peer, ": no answer in time"));
  }
  if (!s.accepted_) return s.Broken();
  return stream;
}

OutboundStream::~OutboundStream() {
  {
    absl::MutexLock lock(&mu_);
    ReleaseHoldLocked();
  }
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));  // gRPC guarantees OnDone after a cancel
}

void OutboundStream::ReleaseHoldLocked() {
  if (!holding_) return;
  holding_ = false;
  // Nothing more is written: the queued frames are lost with the stream.
  for (QueuedWrite& q : queued_) {
    if (q.posted != nullptr) {
      q.posted->Written(absl::UnavailableError(
          absl::StrCat("the ring stream to ", peer_, " ended before the frame was written")));
    }
  }
  queued_.clear();
  queued_copies_ = 0;
  RemoveHold();  // never runs OnDone inline: it is scheduled, so mu_ may be held
}

absl::Status OutboundStream::Broken() {
  // Once the hold is released the call ends as soon as its operations have: wait (briefly)
  // for OnDone, which carries the peer's reason.
  if (!holding_) WaitUntil(mu_, absl::Condition(&done_), SteadyDeadline(absl::Seconds(1)), nullptr);
  if (!done_) return absl::UnavailableError(absl::StrCat("the ring stream to ", peer_, " failed"));
  return absl::UnavailableError(absl::StrCat("the ring stream to ", peer_, " ended: ",
                                             final_status_.error_message().empty()
                                                 ? "connection lost"
                                                 : final_status_.error_message()));
}

void OutboundStream::StartWriteLocked() {
  write_in_flight_ = true;
  StartWrite(&write_buffer_);
}

void OutboundStream::StartQueuedLocked() {
  if (write_in_flight_ || queued_.empty() || !holding_ || done_) return;
  QueuedWrite next = std::move(queued_.front());
  queued_.pop_front();
  if (next.posted == nullptr) --queued_copies_;
  write_buffer_ = std::move(next.buffer);
  writing_ = std::move(next.posted);
  StartWriteLocked();
}

absl::Status OutboundStream::QueueFrame(const Frame& frame, absl::Span<const std::byte> payload,
                                        const WaitLimit& limit) {
  // The copy lives until gRPC releases its slice.
  auto copy = std::make_shared<std::vector<std::byte>>(payload.begin(), payload.end());
  return QueueEncoded(EncodeFrame(frame, *copy, [copy] {}), limit);
}

absl::Status OutboundStream::QueueEncoded(grpc::ByteBuffer encoded, const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return queued_copies_ < kMaxQueuedFrames || !holding_ || done_;
  };
  if (!WaitUntil(mu_, absl::Condition(&room), limit.deadline, &limit)) {
    return limit.IsCancelled()
               ? absl::CancelledError(absl::StrCat("sending to ", peer_, " cancelled"))
               : absl::DeadlineExceededError(absl::StrCat(
                     "sending to ", peer_, " timed out: ", peer_,
                     " took no frame in time, so it is behind this rank (slow or stalled "
                     "itself, or waiting for a rank behind it)"));
  }
  if (!holding_ || done_) return Broken();
  queued_.push_back({std::move(encoded), nullptr});
  ++queued_copies_;
  StartQueuedLocked();
  return absl::OkStatus();
}

void OutboundStream::PostFrame(const Frame& frame, absl::Span<const std::byte> payload,
                               SendDone done) {
  auto posted = std::make_shared<PostedWrite>(std::move(done));
  grpc::ByteBuffer encoded = EncodeFrame(frame, payload, [posted] { posted->Released(); });
  absl::MutexLock lock(&mu_);
  if (!holding_ || done_) {
    posted->Written(Broken());  // `encoded` goes after the lock, releasing the payload
    return;
  }
  std::erase_if(posted_, [](const std::shared_ptr<PostedWrite>& p) { return p->finished(); });
  posted_.push_back(posted);
  queued_.push_back({std::move(encoded), std::move(posted)});
  StartQueuedLocked();
}

absl::Status OutboundStream::WriteFrame(const Frame& frame, absl::Span<const std::byte> payload,
                                        const WaitLimit& limit, absl::Duration grace,
                                        std::optional<ShmPayloadRef> shm) {
  // A frame whose payload waits in the slot ring is header-only: queued like a small one.
  if (shm.has_value()) return QueueEncoded(EncodeShmFrame(frame, *shm), limit);
  // An abort notice is written and waited for as before: it is the failure's news, sent
  // once as a collective ends, and a stream torn down right after must not drop it.
  if (frame.kind != FrameKind::kAbort && payload.size() <= kQueuedPayloadBytes) {
    return QueueFrame(frame, payload, limit);
  }
  auto latch = std::make_shared<ReleaseLatch>();
  absl::Status result;
  bool stream_failed = false;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return (!write_in_flight_ && queued_.empty()) || done_;
    };
    // Only the hello and queued small frames can still be in flight here (each zero-copy
    // WriteFrame waits for its own write); they go first, in order.
    if (!WaitUntil(mu_, absl::Condition(&idle), limit.deadline, &limit)) {
      return limit.IsCancelled()
                 ? absl::CancelledError(absl::StrCat("sending to ", peer_, " cancelled"))
                 : absl::DeadlineExceededError(
                       absl::StrCat("sending to ", peer_, " timed out (the hello is unsent)"));
    }
    if (!holding_) return Broken();
    auto release = [latch] {
      absl::MutexLock lock(&latch->mu);
      latch->released = true;
    };
    write_buffer_ = EncodeFrame(frame, payload, release);
    StartWriteLocked();

    if (!WaitUntil(mu_, absl::Condition(&idle), limit.deadline, &limit)) {
      result = limit.IsCancelled()
                   ? absl::CancelledError(absl::StrCat("sending to ", peer_, " cancelled"))
                   : absl::DeadlineExceededError(
                         absl::StrCat("sending to ", peer_, " timed out: ", peer_,
                                      " took no frame in time, so it is behind this rank "
                                      "(slow or stalled itself, or waiting for a rank "
                                      "behind it)"));
      // gRPC still holds the payload: give the write a moment, then give up the stream.
      if (!WaitUntil(mu_, absl::Condition(&idle), SteadyDeadline(grace), nullptr)) {
        context_.TryCancel();
        mu_.Await(absl::Condition(&idle));
      }
    }
    if (!holding_) {
      if (result.ok()) result = Broken();
      stream_failed = true;
    }
    // The write is complete (or the call is over): the buffer is ours again.
    write_buffer_.Clear();
  }
  // A failed stream never reads the payload again, though the call may keep its slice
  // until it is destroyed. A live one may: the transport can hold the bytes until they
  // are on the socket, so wait for the release, cancelling the stream if that takes
  // past the limit.
  if (stream_failed) return result;
  const Release release = AwaitRelease(*latch, limit);
  // The frame counts as sent only if the stream stood until gRPC let go of it.
  if (!result.ok()) return result;
  switch (release) {
    case Release::kReleased:
      return result;
    case Release::kGivenUp:
      return limit.IsCancelled()
                 ? absl::CancelledError(absl::StrCat("sending to ", peer_,
                                                     " cancelled with the frame in flight"))
                 : absl::DeadlineExceededError(absl::StrCat(
                       "sending to ", peer_, " timed out with the frame in flight"));
    case Release::kStreamEnded:
      break;
  }
  absl::MutexLock lock(&mu_);
  return Broken();
}

OutboundStream::Release OutboundStream::AwaitRelease(ReleaseLatch& latch, const WaitLimit& limit) {
  bool given_up = false;
  while (true) {
    {
      absl::MutexLock lock(&latch.mu);
      if (latch.mu.AwaitWithTimeout(absl::Condition(&latch.released), kCancelPollInterval)) {
        return given_up ? Release::kGivenUp : Release::kReleased;
      }
    }
    absl::MutexLock lock(&mu_);
    // The call is over: nothing reads the payload any more.
    if (done_) return given_up ? Release::kGivenUp : Release::kStreamEnded;
    if (!given_up && (limit.IsCancelled() || limit.deadline.Passed())) {
      context_.TryCancel();
      given_up = true;
    }
  }
}

void OutboundStream::OnWriteDone(bool ok) {
  InReaction(this);
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  // The buffer is ours again: dropping it lets gRPC's release of a posted payload (which
  // may come later, from the transport) be the last reference.
  write_buffer_.Clear();
  if (writing_ != nullptr) {
    writing_->Written(ok ? absl::OkStatus()
                         : absl::UnavailableError(absl::StrCat(
                               "the ring stream to ", peer_, " broke with the frame in flight")));
    writing_.reset();
  }
  if (!ok) {
    ReleaseHoldLocked();  // the stream broke: nothing more will be sent
    return;
  }
  StartQueuedLocked();
}

void OutboundStream::OnReadDone(bool ok) {
  InReaction(this);
  if (!ok) {
    // The peer finished the stream (or it broke): nothing more will be sent; OnDone,
    // which follows once the hold is gone, carries the status.
    absl::MutexLock lock(&mu_);
    ReleaseHoldLocked();
    return;
  }
  v1::PeerAck ack;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (ack_buffer_.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const bool accepted = ack.ParseFromString(bytes) && ack.accepted();
  absl::MutexLock lock(&mu_);
  accepted_ = accepted;
  shm_accepted_ = accepted && ack.shm_accepted();
  mailbox_accepted_ = shm_accepted_ && ack.mailbox_accepted();
  absl::StatusOr<DataKey> key = ParseDataKey(ack.data_key());
  absl::StatusOr<RecordSealKey> seal = ParseRecordSealKey(ack.data_seal_key());
  if (accepted && !shm_accepted_ && ack.data_port() > 0 && ack.data_port() <= 65535 && key.ok() &&
      (ack.data_seal_key().empty() || seal.ok())) {
    data_offer_ = DataOffer{static_cast<int>(ack.data_port()), *key,
                            seal.ok() ? std::optional<RecordSealKey>(*seal) : std::nullopt};
  }
  // Keep a read pending: it ends when the peer finishes the stream. This completion is
  // the only place that re-arms it, and the call cannot be done while it runs.
  StartRead(&ack_buffer_);
}

void OutboundStream::OnDone(const grpc::Status& status) {
  InReaction(this);
  absl::MutexLock lock(&mu_);
  final_status_ = status;
  done_ = true;
  // The call is over: no posted payload is read any more, and none is out unless its
  // write already said so.
  for (const std::shared_ptr<PostedWrite>& posted : posted_) {
    posted->Written(absl::UnavailableError(absl::StrCat(
        "the ring stream to ", peer_, " ended: ",
        status.error_message().empty() ? "connection lost" : status.error_message())));
    posted->Released();
  }
  posted_.clear();
}

}  // namespace ringsync
