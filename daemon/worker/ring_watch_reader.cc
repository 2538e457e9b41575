#include "daemon/worker/ring_watch_reader.h"

#include <utility>

#include "wire/reaction_order.h"

namespace ringsync {

RingWatchReader::RingWatchReader(v1::Coordinator::Stub& stub, grpc::ClientContext& context,
                                 v1::WatchRingRequest request)
    : context_(context), request_(std::move(request)) {
  stub.async()->WatchRing(&context_, &request_, this);
  absl::MutexLock lock(&mu_);
  AddHold();
  holding_ = true;
  StartReadLocked();
  HandToGrpc(this);
  StartCall();
}

RingWatchReader::~RingWatchReader() {
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  // No read starts from here on; without one outstanding the call can end now, else it
  // ends with that read's completion (which may still bring a view, read before the cancel).
  closing_ = true;
  if (!read_outstanding_) ReleaseHoldLocked();
  mu_.Await(absl::Condition(&done_));  // gRPC calls OnDone once the call is over
}

void RingWatchReader::StartReadLocked() {
  read_outstanding_ = true;
  StartRead(&reading_);
}

void RingWatchReader::ReleaseHoldLocked() {
  if (!holding_) return;
  holding_ = false;
  RemoveHold();  // OnDone is scheduled, never run inline: mu_ may be held
}

std::optional<v1::RingView> RingWatchReader::Next() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !views_.empty() || done_; };
  mu_.Await(absl::Condition(&ready));
  if (views_.empty()) return std::nullopt;
  v1::RingView view = std::move(views_.front());
  views_.pop_front();
  // Reading paused on a full queue: there is room again.
  if (holding_ && !closing_ && !read_outstanding_) StartReadLocked();
  return view;
}

grpc::Status RingWatchReader::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void RingWatchReader::OnReadDone(bool ok) {
  InReaction(this);
  absl::MutexLock lock(&mu_);
  read_outstanding_ = false;
  if (ok) {
    views_.push_back(std::move(reading_));
    reading_.Clear();
  }
  if (!ok || closing_) {
    // The stream ended (or broke), or the reader is going: no more reads; OnDone follows
    // with the status.
    ReleaseHoldLocked();
    return;
  }
  if (views_.size() < kMaxQueuedViews) StartReadLocked();
}

void RingWatchReader::OnDone(const grpc::Status& status) {
  InReaction(this);
  absl::MutexLock lock(&mu_);
  status_ = status;
  done_ = true;
}

}  // namespace ringsync
