// Cancellation: a flag with a reason that blocked calls poll (see WaitLimit). A child
// is cancelled when its parent is, so a collective can be cancelled both from inside
// (its other thread failed) and from outside (the client left, the ring changed).
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ringsync {

class Cancellation {
 public:
  Cancellation() = default;
  explicit Cancellation(const Cancellation* parent) : parent_(parent) {}
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // The first reason given wins. REQUIRES: !reason.ok().
  void Cancel(const absl::Status& reason) {
    absl::MutexLock lock(&mu_);
    if (reason_.ok()) reason_ = reason;
    cancelled_.store(true);
  }

  bool IsCancelled() const {
    return cancelled_.load() || (parent_ != nullptr && parent_->IsCancelled());
  }

  // Why: this one's reason, else the parent's; OK when not cancelled.
  absl::Status reason() const {
    {
      absl::MutexLock lock(&mu_);
      if (!reason_.ok()) return reason_;
    }
    return parent_ != nullptr ? parent_->reason() : absl::OkStatus();
  }

 private:
  const Cancellation* const parent_ = nullptr;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
