#include "daemon/transport/grpc/peer_inbox.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringsync {
PeerInbox::PeerInbox(uint64_t generation, size_t capacity)
    : generation_(generation), capacity_(std::max<size_t>(1, capacity)) {}

absl::Status PeerInbox::Attach(std::shared_ptr<InboxFeeder> feeder, int sender_rank,
                               const std::string& sender_worker) {
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return closed_;
  if (ever_attached_) {
    return absl::AlreadyExistsError(absl::StrCat("generation ", generation_,
                                                 " already has an incoming stream from rank ",
                                                 sender_rank_, " (worker ", sender_worker_, ")"));
  }
  feeder_ = std::move(feeder);
  ever_attached_ = true;
  sender_rank_ = sender_rank;
  sender_worker_ = sender_worker;
  return absl::OkStatus();
}

void PeerInbox::Detach(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  feeder_ = nullptr;
  if (closed_.ok()) closed_ = why.ok() ? absl::UnavailableError("stream closed") : why;
}

bool PeerInbox::Push(ReceivedFrame frame) {
  absl::MutexLock lock(&mu_);
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
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || !closed_.ok(); };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&ready), limit,
                                  absl::StrCat("receive from rank ", sender_rank_));
      !s.ok()) {
    return s;
  }
  if (queue_.empty()) return closed_;
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
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || !closed_.ok(); };
  if (absl::Status s = AwaitWithLimit(mu_, absl::Condition(&ready), limit,
                                  absl::StrCat("receive from rank ", sender_rank_));
      !s.ok()) {
    return s;
  }
  if (queue_.empty()) return closed_;
  return queue_.front().frame;
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

bool PeerInbox::attached() const {
  absl::MutexLock lock(&mu_);
  return feeder_ != nullptr;
}

std::string PeerInbox::sender_description() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("rank ", sender_rank_, " (worker ", sender_worker_, ")");
}

}  // namespace ringsync
