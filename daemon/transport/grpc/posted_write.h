// PostedWrite: the outcome of one frame posted on an OutboundStream (Link::PostSend). Its
// SendDone runs once both halves are known: how the write ended (gRPC's write completion,
// or the stream ending before the frame was written), and that gRPC no longer reads the
// payload (its slice was released, or the call is over).
//
// Thread-safety: all methods are safe from any thread; SendDone runs on the thread that
// completes the pair, outside this object's lock.
#pragma once

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/link/link.h"

namespace ringsync {

class PostedWrite {
 public:
  explicit PostedWrite(SendDone done) : done_(std::move(done)) {}

  // How the write ended; only the first call counts.
  void Written(const absl::Status& outcome);
  // gRPC let go of the payload; later calls do nothing.
  void Released();
  // Whether SendDone has run (or is running).
  bool finished() const;

 private:
  // SendDone and its outcome, taken out, if both halves are known and it has not run yet.
  struct Completion {
    SendDone done;
    absl::Status outcome;
  };
  std::optional<Completion> TakeCompletion() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a completion taken out, outside the lock: it may take other locks (a pipeline's).
  static void Run(std::optional<Completion> completion);

  mutable absl::Mutex mu_;
  std::optional<absl::Status> outcome_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  SendDone done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
