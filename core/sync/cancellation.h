// Cancellation: a flag with a reason that blocked calls poll (see WaitLimit). A child
// is cancelled when either of its parents is, so a collective can be cancelled both
// from inside (its other thread failed) and from outside (the client left, the ring
// changed).
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ringsync {

class Cancellation {
 public:
  Cancellation() = default;
  explicit Cancellation(const Cancellation* parent, const Cancellation* other_parent = nullptr)
      : parents_{parent, other_parent} {}
  // A child that is also cancelled, for `reason`, once `condition` holds: for a wait that
  // must also end on an event that nobody signals to it (waits poll IsCancelled, see
  // WaitLimit). `condition` runs on the waiting threads, possibly under their locks, so
  // it must be quick and take no lock that is ever held while waiting on this one.
  // REQUIRES: !reason.ok().
  Cancellation(const Cancellation* parent, std::function<bool()> condition, absl::Status reason)
      : parents_{parent, nullptr},
        condition_(std::move(condition)),
        condition_reason_(std::move(reason)) {}
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
    if (condition_ && condition_()) return true;
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
    if (condition_ && condition_()) return condition_reason_;
    for (const Cancellation* parent : parents_) {
      if (parent == nullptr) continue;
      if (absl::Status why = parent->reason(); !why.ok()) return why;
    }
    return absl::OkStatus();
  }

 private:
  const Cancellation* const parents_[2] = {nullptr, nullptr};
  const std::function<bool()> condition_;  // empty: none
  const absl::Status condition_reason_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
