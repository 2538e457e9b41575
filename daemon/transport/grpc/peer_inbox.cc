#include "daemon/transport/grpc/peer_inbox.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
PeerInbox::PeerInbox(uint64_t generation, size_t capacity)
    : generation_(generation), capacity_(std::max<size_t>(1, capacity)) {}

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
    fence_ = SequenceFence();
    newest_aborted_ = 0;  // nor believe its aborts
    reading_paused_ = false;
    stream_end_ = refused;
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
}

absl::Status PeerInbox::Explain(const absl::Status& waited) const {
  if (waited.ok() || stream_end_.ok()) return waited;
  return absl::Status(waited.code(), absl::StrCat(waited.message(), " (", stream_end_.message(),
                                                  "; waiting for it to reconnect)"));
}

absl::StatusOr<bool> PeerInbox::Push(ReceivedFrame frame, bool first_on_stream) {
  absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
  if (absl::Status s = AwaitFrame(limit); !s.ok()) return s;
  return queue_.front().frame;
}

absl::Status PeerInbox::AwaitFrame(const WaitLimit& limit) {
  const uint64_t lost_before = streams_lost_;
  auto ready = [this, lost_before]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || !closed_.ok() || streams_lost_ != lost_before;
  };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&ready), limit,
                                      absl::StrCat("receive from rank ", sender_rank_));
      !s.ok()) {
    return Explain(s);
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
  }
  if (feeder != nullptr) feeder->EndStream(why);
}

size_t PeerInbox::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

uint64_t PeerInbox::newest_aborted_sequence() const {
  absl::MutexLock lock(&mu_);
  return newest_aborted_;
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
