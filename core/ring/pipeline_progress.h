// PipelineProgress: what a collective's sends have done, shared between the thread that
// posts them (the receiving thread, as each segment's data comes in) and whichever
// thread learns their outcome (SendQueue's own thread, or the link's) — which posted
// sends finished and which of them, counted from the first, all went out — and whether
// the pipeline failed.
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
  // One more send was posted; returns its index (0, 1, 2, ... in post order).
  size_t Posted();
  // Send `index` finished with `outcome`; sends may finish in any order. A failed one
  // fails the pipeline. REQUIRES: once per posted index.
  void Finish(size_t index, const absl::Status& outcome);
  void Fail(const absl::Status& status);

  // Blocks until the first `count` posted sends went out, the pipeline failed (returns
  // that failure), or the limit ends. The other side always hits the deadline on the
  // link first and reports the more telling error, so this wait gives it a head start
  // longer than RingOptions::abort_notice_timeout.
  absl::Status AwaitSent(size_t count, const WaitLimit& limit);
  // True once every posted send finished; false when `wait` passed first.
  bool AwaitAllFinished(absl::Duration wait);

  absl::Status failure() const;

 private:
  mutable absl::Mutex mu_;
  size_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  size_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> went_out_ ABSL_GUARDED_BY(mu_);  // by index
  size_t sent_prefix_ ABSL_GUARDED_BY(mu_) = 0;      // went_out_[0, sent_prefix_) all true
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
