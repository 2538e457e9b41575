// WaitLimit: when a blocking call must give up — at a deadline, or soon after a
// Cancellation is cancelled — and the one helper every blocking wait in ringsync uses.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/sync/cancellation.h"

namespace ringsync {

struct WaitLimit {
  absl::Time deadline = absl::InfiniteFuture();
  const Cancellation* cancellation = nullptr;

  bool IsCancelled() const { return cancellation != nullptr && cancellation->IsCancelled(); }
};

// How often a blocked call looks at WaitLimit::cancellation: the canceller does not hold
// the waiter's mutex and so cannot wake it.
inline constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(5);

// Waits on `mu` (held) until `ready` holds (OK, even past the deadline), the limit's
// cancellation (Cancelled) or its deadline (DeadlineExceeded); `what` starts the message.
absl::Status AwaitWithLimit(absl::Mutex& mu, const absl::Condition& ready, const WaitLimit& limit,
                            absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

}  // namespace ringsync
