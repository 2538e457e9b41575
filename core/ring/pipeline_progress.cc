#include "core/ring/pipeline_progress.h"

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr absl::Duration kHeadStart = absl::Seconds(3);

}  // namespace

size_t PipelineProgress::Posted() {
  absl::MutexLock lock(&mu_);
  went_out_.push_back(false);
  return posted_++;
}

void PipelineProgress::Finish(size_t index, const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  ++finished_;
  if (!outcome.ok()) {
    if (failure_.ok()) failure_ = outcome;
    return;
  }
  went_out_[index] = true;
  while (sent_prefix_ < went_out_.size() && went_out_[sent_prefix_]) ++sent_prefix_;
}

void PipelineProgress::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = status;
}

absl::Status PipelineProgress::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status PipelineProgress::AwaitSent(size_t count, const WaitLimit& outer) {
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !failure_.ok() || sent_prefix_ >= count;
  };
  const WaitLimit limit{outer.deadline + kHeadStart, outer.cancellation};
  absl::MutexLock lock(&mu_);
  absl::Status waited =
      AwaitWithLimit(mu_, absl::Condition(&done), limit, "waiting for this rank's own send to finish");
  if (!failure_.ok()) return failure_;
  return waited;
}

bool PipelineProgress::AwaitAllFinished(absl::Duration wait) {
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return finished_ == posted_; };
  absl::MutexLock lock(&mu_);
  // Through AwaitWithLimit, so that `wait` is measured on the monotonic clock: Close's grace
  // is a promise of time given, and Abseil's own timed wait may end a little short of it.
  return AwaitWithLimit(mu_, absl::Condition(&done), WaitLimit{SteadyDeadline(wait)},
                        "waiting for the posted sends to finish")
      .ok();
}

}  // namespace ringsync
