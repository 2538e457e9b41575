// PipelineProgress: the hand-off between a collective's sender thread and its
// receiving thread — how many segments of each step have been received, how many
// frames have been sent, and whether either side failed.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/link/link.h"

namespace ringsync {

class PipelineProgress {
 public:
  explicit PipelineProgress(int steps) : received_(static_cast<size_t>(steps), 0) {}

  void MarkReceived(int step);
  void MarkSent();
  void MarkSenderDone();
  // True once the sender finished; false when `wait` passed first.
  bool AwaitSenderDone(absl::Duration wait);
  void Fail(const absl::Status& status);

  // Block until `count` segments of `step` were received (resp. `count` frames sent
  // in total), the pipeline failed (returns that failure), or the limit ends. The other
  // side always hits the deadline on the link first and reports the more telling error,
  // so these waits give it a head start longer than RingOptions::abort_notice_timeout.
  absl::Status AwaitReceived(int step, size_t count, const WaitLimit& limit);
  absl::Status AwaitSent(size_t count, const WaitLimit& limit);

  absl::Status failure() const;

 private:
  absl::Status Await(const absl::Condition& done, const WaitLimit& limit, const char* what);

  mutable absl::Mutex mu_;
  std::vector<size_t> received_ ABSL_GUARDED_BY(mu_);
  size_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  bool sender_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
