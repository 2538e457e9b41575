#include "core/ring/pipeline_progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr absl::Duration kHeadStart = absl::Seconds(3);

}  // namespace

void PipelineProgress::MarkReceived(int step) {
  absl::MutexLock lock(&mu_);
  ++received_[static_cast<size_t>(step)];
}

void PipelineProgress::MarkSent() {
  absl::MutexLock lock(&mu_);
  ++sent_;
}

void PipelineProgress::MarkSenderDone() {
  absl::MutexLock lock(&mu_);
  sender_done_ = true;
}

bool PipelineProgress::AwaitSenderDone(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&sender_done_), wait);
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
  const WaitLimit limit{outer.deadline + kHeadStart, outer.cancellation};
  absl::MutexLock lock(&mu_);
  absl::Status waited = AwaitWithLimit(mu_, done, limit, what);
  if (!failure_.ok()) return failure_;
  return waited;
}

}  // namespace ringsync
