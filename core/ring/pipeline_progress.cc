#include "core/ring/pipeline_progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr absl::Duration kHeadStart = absl::Seconds(1);

}  // namespace

void PipelineProgress::MarkReceived(int step) {
  absl::MutexLock lock(&mu_);
  ++received_[static_cast<size_t>(step)];
}

void PipelineProgress::MarkSent() {
  absl::MutexLock lock(&mu_);
  ++sent_;
}

void PipelineProgress::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = status;
}

absl::Status PipelineProgress::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status PipelineProgress::AwaitReceived(int step, size_t count, const WaitLimit& limit) {
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !failure_.ok() || received_[static_cast<size_t>(step)] >= count;
  };
  return Await(absl::Condition(&done), limit, "waiting for the previous step's segment");
}

absl::Status PipelineProgress::AwaitSent(size_t count, const WaitLimit& limit) {
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !failure_.ok() || sent_ >= count; };
  return Await(absl::Condition(&done), limit, "waiting for this rank's own send to finish");
}

absl::Status PipelineProgress::Await(const absl::Condition& done, const WaitLimit& outer,
                                     const char* what) {
  const WaitLimit limit{outer.deadline + kHeadStart, outer.cancelled};
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!failure_.ok()) return failure_;
    if (limit.IsCancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    const absl::Time now = absl::Now();
    if (now >= limit.deadline) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    if (mu_.AwaitWithDeadline(done, std::min(limit.deadline, now + kCancelPollInterval))) {
      if (!failure_.ok()) return failure_;
      return absl::OkStatus();
    }
  }
}

}  // namespace ringsync
