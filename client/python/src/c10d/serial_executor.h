// SerialExecutor: one thread that runs posted closures in the order they were posted.
//
// The process group posts "wait for this collective, then complete its Work and future"
// here: torch's DDP never calls Work::wait() on gradient buckets, it waits on their
// futures, so something other than the caller must notice completion. The ring completes
// collectives in the order they were issued, so one thread waiting on them in that order
// completes each as soon as it finishes.
//
// Thread-safety: Post() may be called from any thread before Stop(). Stop (and the
// destructor) runs what was posted, then joins.
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringsync::python {

class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void Post(std::function<void()> job);
  // Runs what was posted, then joins the thread. Idempotent; the caller must not hold
  // anything a job needs (the process group lets go of the GIL first).
  void Stop();

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace ringsync::python
