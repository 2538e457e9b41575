#include "core/sync/wait_limit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringsync {

absl::Status AwaitWithLimit(absl::Mutex& mu, const absl::Condition& ready, const WaitLimit& limit,
                            absl::string_view what) {
  while (true) {
    if (ready.Eval()) return absl::OkStatus();
    if (limit.IsCancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    const absl::Duration left = limit.deadline.Left();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    }
    mu.AwaitWithTimeout(ready, std::min(left, kCancelPollInterval));
  }
}

}  // namespace ringsync
