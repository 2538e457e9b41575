#include "core/sync/wait_limit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::Status AwaitWithLimit(absl::Mutex& mu, const absl::Condition& ready, const WaitLimit& limit,
                            absl::string_view what) {
  while (true) {
    if (ready.Eval()) return absl::OkStatus();
    if (limit.IsCancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    const absl::Time now = absl::Now();
    if (now >= limit.deadline) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    mu.AwaitWithDeadline(ready, std::min(limit.deadline, now + kCancelPollInterval));
  }
}

}  // namespace ringsync
