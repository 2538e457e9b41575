#include "daemon/transport/grpc/peer_inbox.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/transport/grpc/frame_codec.h"
#include "spdlog/spdlog.h"

namespace ringsync {
namespace {

// A record — a mailbox's or a data connection's — is an encoded frame exactly as a gRPC
// message carries it, so it passes the same checks (DecodeRecord); this is the frame it
// holds. A payload in one of the sender's slots is taken from `slots`; where there are
// none (null) a frame naming one is refused. `where` ("in the frame mailbox", "on the data
// connection") is for messages.
absl::StatusOr<ReceivedFrame> FrameOfRecord(absl::StatusOr<DecodedMessage> message,
                                            SlotRingReader* slots, absl::string_view where) {
  if (!message.ok()) return message.status();
  if (message->is_hello) return absl::InvalidArgumentError(absl::StrCat("a hello ", where));
  if (message->shm.has_value()) {
    if (slots == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("a frame names a shared-memory slot ", where));
    }
    absl::StatusOr<SlotRingReader::Payload> payload =
        slots->Take(message->shm->slot, message->shm->bytes);
    if (!payload.ok()) return payload.status();
    message->frame.payload = payload->bytes;
    message->frame.storage = std::move(payload->storage);
  }
  return std::move(message->frame);
}

}  // namespace

PeerInbox::PeerInbox(uint64_t generation, size_t capacity, absl::Duration mailbox_spin,
                     int stride)
    : generation_(generation),
      stride_(stride),
      capacity_(std::max<size_t>(1, capacity)),
      mailbox_spin_(mailbox_spin) {}

std::string DescribeSender(int rank, absl::string_view worker_id) {
  return absl::StrCat("rank ", rank, " (worker ", absl::CHexEscape(worker_id.substr(0, 64)), ")");
}

absl::Status PeerInbox::Expect(const ExpectedSender& sender) {
  std::shared_ptr<InboxFeeder> impostor;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    expected_ = sender;
    if (!ever_attached_ || (sender_rank_ == sender.rank && sender_worker_ == sender.worker_id)) {
      return absl::OkStatus();
    }
    refused = absl::PermissionDeniedError(absl::StrCat(
        "the ring stream from ", DescribeSender(sender_rank_, sender_worker_), " for generation ",
        generation_, " was opened before this worker knew the view, which names ",
        DescribeSender(sender.rank, sender.worker_id), " as its left neighbour"));
    impostor = std::move(feeder_);
    ever_attached_ = false;
    sender_rank_ = -1;
    sender_worker_.clear();
    queue_.clear();  // never deliver its frames
    fence_ = SequenceFence(stride_ > 1);
    newest_aborted_ = 0;  // nor believe its aborts
    reading_paused_ = false;
    stream_end_ = refused;
    DropMailboxLocked();
    DropDataLocked();
  }
  if (impostor != nullptr) impostor->EndStream(refused);
  return refused;
}

absl::Status PeerInbox::Attach(std::shared_ptr<InboxFeeder> feeder, int sender_rank,
                               const std::string& sender_worker) {
  std::shared_ptr<InboxFeeder> replaced;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_.ok()) return closed_;
    if (expected_.has_value() &&
        (sender_rank != expected_->rank || sender_worker != expected_->worker_id)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "a ring stream from ", DescribeSender(sender_rank, sender_worker), " for generation ",
          generation_, ", whose view names ", DescribeSender(expected_->rank, expected_->worker_id),
          " as this worker's left neighbour"));
    }
    if (ever_attached_ && sender_rank != sender_rank_) {
      return absl::AlreadyExistsError(absl::StrCat(
          "generation ", generation_, " already has an incoming stream from rank ", sender_rank_,
          " (worker ", sender_worker_, "); rank ", sender_rank, " is not this rank's left neighbour"));
    }
    // The same neighbour reconnecting (it gave up its previous stream) replaces it.
    replaced = std::exchange(feeder_, std::move(feeder));
    // A new stream brings its own mailbox, if any; what the old one still held is lost
    // with it, as a replaced gRPC stream's unread messages are; so is its data connection.
    DropMailboxLocked();
    DropDataLocked();
    ever_attached_ = true;
    sender_rank_ = sender_rank;
    sender_worker_ = sender_worker;
    stream_end_ = absl::OkStatus();
  }
  if (replaced != nullptr) replaced->EndStream(absl::CancelledError("replaced by a new stream"));
  return absl::OkStatus();
}

void PeerInbox::Detach(const InboxFeeder* feeder, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (feeder_.get() != feeder) return;  // an older stream, already replaced
  feeder_ = nullptr;
  stream_end_ = why.ok() ? absl::UnavailableError("stream closed") : why;
  ++streams_lost_;
  RingLocked();  // frames its mailbox still holds are delivered first
}

void PeerInbox::AttachMailbox(const InboxFeeder* feeder, std::shared_ptr<SlotRingReader> slots) {
  absl::MutexLock lock(&mu_);
  if (feeder_.get() != feeder || slots == nullptr || slots->mailbox() == nullptr) return;
  mailbox_ = std::move(slots);
  ++mailboxes_attached_;
  mailbox_first_frame_ = true;
  via_stream_.clear();
  stream_markers_ = 0;
}

void PeerInbox::RingLocked() {
  if (mailbox_ != nullptr) mailbox_->mailbox()->Ring();
  if (data_ != nullptr) data_->Wake();
}

void PeerInbox::AttachData(const InboxFeeder* feeder, std::shared_ptr<IncomingRecords> records) {
  absl::MutexLock lock(&mu_);
  if (feeder_.get() != feeder || records == nullptr) return;
  DropDataLocked();
  data_ = std::move(records);
  ++data_attached_;
  data_first_frame_ = true;
}

void PeerInbox::DropDataLocked() {
  if (data_ == nullptr) return;
  data_->Wake();  // a receiver asleep on it looks again, and finds it gone
  data_->Close();
  data_ = nullptr;
}

void PeerInbox::DrainDataLocked() {
  while (data_ != nullptr && queue_.size() < capacity_) {
    absl::StatusOr<std::optional<ReceivedRecord>> record = data_->TryRead();
    if (!record.ok()) {
      DoomFeederLocked(absl::IsOutOfRange(record.status())
                           ? absl::UnavailableError("its data connection closed")
                           : absl::Status(record.status().code(),
                                          absl::StrCat("its data connection: ", record.status().message())));
      return;
    }
    if (!record->has_value()) return;
    absl::StatusOr<ReceivedFrame> frame =
        FrameOfRecord(DecodeRecord(std::move((*record)->bytes), (*record)->size), nullptr,
                      "on the data connection");
    if (!frame.ok()) {
      DoomFeederLocked(frame.status());
      return;
    }
    if (!AdmitLocked(*std::move(frame), std::exchange(data_first_frame_, false))) return;
  }
}

void PeerInbox::DropMailboxLocked() {
  RingLocked();  // a receiver asleep on it looks again, and finds it gone
  mailbox_ = nullptr;
  via_stream_.clear();
  stream_markers_ = 0;
}

bool PeerInbox::AdmitLocked(ReceivedFrame frame, bool first_on_stream) {
  if (absl::Status s = fence_.Admit(frame.frame.sequence, first_on_stream); !s.ok()) {
    DoomFeederLocked(absl::PermissionDeniedError(s.message()));
    return false;
  }
  if (frame.frame.kind == FrameKind::kAbort) {
    newest_aborted_ = std::max(newest_aborted_, frame.frame.sequence);
  }
  queue_.push_back(std::move(frame));
  return true;
}

void PeerInbox::DrainMailboxLocked() {
  while (mailbox_ != nullptr && queue_.size() < capacity_) {
    if (stream_markers_ > 0) {  // the next frame is one that came on the stream
      if (via_stream_.empty()) return;
      ReceivedFrame frame = std::move(via_stream_.front());
      via_stream_.pop_front();
      --stream_markers_;
      if (!AdmitLocked(std::move(frame), std::exchange(mailbox_first_frame_, false))) return;
      continue;
    }
    absl::StatusOr<std::optional<std::vector<std::byte>>> record = mailbox_->mailbox()->TryTake();
    if (!record.ok()) {
      DoomFeederLocked(record.status());
      return;
    }
    if (!record->has_value()) return;
    if ((*record)->empty()) {
      ++stream_markers_;
      continue;
    }
    absl::StatusOr<ReceivedFrame> frame =
        FrameOfRecord(DecodeRecord(*std::move(*record)), mailbox_.get(), "in the frame mailbox");
    if (!frame.ok()) {
      DoomFeederLocked(frame.status());
      return;
    }
    if (!AdmitLocked(*std::move(frame), std::exchange(mailbox_first_frame_, false))) return;
  }
}

void PeerInbox::DoomFeederLocked(const absl::Status& why) {
  const absl::Status status(why.code(), absl::StrCat("the ring stream from ",
                                                     DescribeSender(sender_rank_, sender_worker_),
                                                     " for generation ", generation_,
                                                     " broke: ", why.message()));
  spdlog::warn("{}", std::string(status.message()));
  if (feeder_ != nullptr) {
    doomed_.emplace_back(std::move(feeder_), status);
    feeder_ = nullptr;
    ++streams_lost_;
  }
  stream_end_ = status;
  DropMailboxLocked();
  DropDataLocked();
}

void PeerInbox::EndDoomedFeeders() {
  std::vector<std::pair<std::shared_ptr<InboxFeeder>, absl::Status>> doomed;
  {
    absl::MutexLock lock(&mu_);
    doomed.swap(doomed_);
  }
  for (auto& [feeder, why] : doomed) feeder->EndStream(why);
}

absl::Status PeerInbox::Explain(const absl::Status& waited) const {
  if (waited.ok() || stream_end_.ok()) return waited;
  return absl::Status(waited.code(), absl::StrCat(waited.message(), " (", stream_end_.message(),
                                                  "; waiting for it to reconnect)"));
}

absl::StatusOr<bool> PeerInbox::Push(ReceivedFrame frame, bool first_on_stream) {
  absl::MutexLock lock(&mu_);
  if (mailbox_ != nullptr) {
    // A frame too large for the mailbox: delivered where its empty record stands.
    via_stream_.push_back(std::move(frame));
    RingLocked();
    const bool room = via_stream_.size() < capacity_;
    reading_paused_ = !room;
    return room;
  }
  if (absl::Status s = fence_.Admit(frame.frame.sequence, first_on_stream); !s.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "ring stream from ", DescribeSender(sender_rank_, sender_worker_), " for generation ",
        generation_, ": ", s.message()));
  }
  if (frame.frame.kind == FrameKind::kAbort) {
    newest_aborted_ = std::max(newest_aborted_, frame.frame.sequence);
  }
  queue_.push_back(std::move(frame));
  const bool room = queue_.size() < capacity_;
  reading_paused_ = !room;
  return room;
}

absl::StatusOr<ReceivedFrame> PeerInbox::Pop(const WaitLimit& limit) {
  std::shared_ptr<InboxFeeder> resume;
  absl::StatusOr<ReceivedFrame> result = PopLocked(limit, resume);
  if (resume != nullptr) resume->ResumeReading();
  EndDoomedFeeders();
  return result;
}

absl::StatusOr<ReceivedFrame> PeerInbox::PopLocked(const WaitLimit& limit,
                                                   std::shared_ptr<InboxFeeder>& resume) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = AwaitFrame(limit); !s.ok()) return s;
  ReceivedFrame frame = std::move(queue_.front());
  queue_.pop_front();
  if (reading_paused_ && feeder_ != nullptr) {
    reading_paused_ = false;
    resume = feeder_;
  }
  return frame;
}

absl::StatusOr<Frame> PeerInbox::Peek(const WaitLimit& limit) {
  absl::StatusOr<Frame> frame;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = AwaitFrame(limit); !s.ok()) {
      frame = s;
    } else {
      frame = queue_.front().frame;
    }
  }
  EndDoomedFeeders();
  return frame;
}

absl::Status PeerInbox::AwaitFrame(const WaitLimit& limit) {
  const uint64_t lost_before = streams_lost_;
  auto ready = [this, lost_before]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || !closed_.ok() || streams_lost_ != lost_before;
  };
  const std::string what = absl::StrCat("receive from rank ", sender_rank_);
  absl::Duration spin = mailbox_spin_;  // once per frame: a long wait sleeps
  while (true) {
    // Read before the look: a frame that comes after the look rings past it.
    std::shared_ptr<SlotRingReader> slots = mailbox_;  // stays mapped while this sleeps
    std::shared_ptr<IncomingRecords> records = data_;  // stays open while this sleeps
    const uint32_t seen = slots != nullptr ? slots->mailbox()->doorbell() : 0;
    DrainMailboxLocked();
    DrainDataLocked();
    if (ready()) break;
    if (records != nullptr && data_ == records) {
      // Frames come on the data connection: sleep in poll on it (and on its wake-up, which
      // this process uses for anything else this wait looks at).
      if (limit.IsCancelled()) return Explain(absl::CancelledError(absl::StrCat(what, ": cancelled")));
      const absl::Duration left = limit.deadline.Left();
      if (left <= absl::ZeroDuration()) {
        return Explain(absl::DeadlineExceededError(absl::StrCat(what, ": timed out")));
      }
      mu_.Unlock();
      records->Wait(std::min(left, kCancelPollInterval));
      mu_.Lock();
      continue;
    }
    if (mailbox_ == nullptr) {
      // Frames come by gRPC: they are pushed under mu_, which wakes this wait; so does a
      // mailbox or a data connection attaching.
      const uint64_t mailboxes_before = mailboxes_attached_;
      const uint64_t data_before = data_attached_;
      auto ready_or_mailbox = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return ready() || mailboxes_attached_ != mailboxes_before || data_attached_ != data_before;
      };
      if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&ready_or_mailbox), limit, what);
          !s.ok()) {
        return Explain(s);
      }
      continue;
    }
    // Frames come through the mailbox: sleep on its doorbell, which the sender rings
    // after each frame and this process after anything else this wait looks at.
    if (limit.IsCancelled()) return Explain(absl::CancelledError(absl::StrCat(what, ": cancelled")));
    const absl::Duration left = limit.deadline.Left();
    if (left <= absl::ZeroDuration()) {
      return Explain(absl::DeadlineExceededError(absl::StrCat(what, ": timed out")));
    }
    mu_.Unlock();
    slots->mailbox()->Wait(seen, std::min(left, kCancelPollInterval), spin);
    spin = absl::ZeroDuration();
    mu_.Lock();
  }
  if (!queue_.empty()) return absl::OkStatus();
  if (!closed_.ok()) return closed_;
  return absl::UnavailableError(absl::StrCat(
      stream_end_.message(), " while this rank waited for its frames; frames may be lost with it"));
}

absl::StatusOr<int> PeerInbox::AwaitSender(const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ever_attached_ || !closed_.ok(); };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&ready), limit,
                                  "waiting for the previous rank to connect");
      !s.ok()) {
    return s;
  }
  if (!ever_attached_) return closed_;
  return sender_rank_;
}

void PeerInbox::Close(const absl::Status& why) {
  std::shared_ptr<InboxFeeder> feeder;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.ok()) closed_ = why;
    queue_.clear();
    feeder = std::move(feeder_);
    DropMailboxLocked();
    DropDataLocked();
  }
  if (feeder != nullptr) feeder->EndStream(why);
}

size_t PeerInbox::queued() {
  size_t queued = 0;
  {
    absl::MutexLock lock(&mu_);
    DrainMailboxLocked();
    DrainDataLocked();
    queued = queue_.size();
  }
  EndDoomedFeeders();
  return queued;
}

uint64_t PeerInbox::newest_aborted_sequence() {
  uint64_t newest = 0;
  {
    absl::MutexLock lock(&mu_);
    DrainMailboxLocked();
    DrainDataLocked();
    newest = newest_aborted_;
  }
  EndDoomedFeeders();
  return newest;
}

bool PeerInbox::attached() const {
  absl::MutexLock lock(&mu_);
  return feeder_ != nullptr;
}

std::string PeerInbox::sender_description() const {
  absl::MutexLock lock(&mu_);
  return DescribeSender(sender_rank_, sender_worker_);
}

}  // namespace ringsync
