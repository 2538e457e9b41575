// Cancellation: a flag with a reason that blocked calls poll (see WaitLimit). A child
// is cancelled when either of its parents is, so a collective can be cancelled both
// from inside (its other thread failed) and from outside (the client left, the ring
// changed).
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
  explicit Cancellation(const Cancellation* parent, const Cancellation* other_parent = nullptr)
      : parents_{parent, other_parent} {}
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // The first reason given wins. REQUIRES: !reason.ok().
  void Cancel(const absl::Status& reason) {
    absl::MutexLock lock(&mu_);
    if (reason_.ok()) reason_ = reason;
    cancelled_.store(true);
  }

  bool IsCancelled() const {
    if (cancelled_.load()) return true;
    for (const Cancellation* parent : parents_) {
      if (parent != nullptr && parent->IsCancelled()) return true;
    }
    return false;
  }

  // Why: this one's reason, else a parent's; OK when not cancelled.
  absl::Status reason() const {
    {
      absl::MutexLock lock(&mu_);
      if (!reason_.ok()) return reason_;
    }
    for (const Cancellation* parent : parents_) {
      if (parent == nullptr) continue;
      if (absl::Status why = parent->reason(); !why.ok()) return why;
    }
    return absl::OkStatus();
  }

 private:
  const Cancellation* const parents_[2] = {nullptr, nullptr};
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
