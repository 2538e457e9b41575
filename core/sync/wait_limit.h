// WaitLimit: when a blocking call must give up — at a deadline, or soon after a
// Cancellation is cancelled — and the one helper every blocking wait in ringsync uses.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/sync/cancellation.h"
#include "core/sync/steady_deadline.h"

namespace ringsync {

struct WaitLimit {
  SteadyDeadline deadline;  // on the monotonic clock: a step of the system clock moves no limit
  const Cancellation* cancellation = nullptr;

  bool IsCancelled() const { return cancellation != nullptr && cancellation->IsCancelled(); }
};

// How often a blocked call looks at WaitLimit::cancellation and its deadline: the canceller
// does not hold the waiter's mutex and so cannot wake it, and Abseil's timed waits run on
// the wall clock (a forward step ends a slice early; it is then taken again).
inline constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(5);

// Waits on `mu` (held) until `ready` holds (OK, even past the deadline), the limit's
// cancellation (Cancelled) or its deadline (DeadlineExceeded); `what` starts the message.
absl::Status AwaitWithLimit(absl::Mutex& mu, const absl::Condition& ready, const WaitLimit& limit,
                            absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

}  // namespace ringsync
