// CollectiveExecutor: runs the attached training process's collectives on the ring,
// one at a time, strictly in the order the client numbered them (client_sequence), so
// an SDK may keep several in flight and every rank still runs them in the same order.
//
// While no client is attached it answers the ring for it: when the other ranks start a
// collective, it sends an abort naming this rank, so they fail at once instead of
// waiting for their deadline.
//
// Thread-safety: all public methods are safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/reduce/reducer.h"
#include "daemon/worker/collective_job.h"
#include "daemon/worker/ring_manager.h"

namespace ringsync {

struct ExecutorCounters {
  uint64_t completed = 0;
  uint64_t failed = 0;
  std::string last_error;
};

class CollectiveExecutor {
 public:
  CollectiveExecutor(std::string worker_id, RingManager& ring, Reducer& reducer,
                     size_t segment_bytes);
  ~CollectiveExecutor();  // stops the executor thread

  // Queues a job; it finishes (job->done) with its result. Jobs whose client_sequence was
  // used already are refused at once.
  void Submit(std::shared_ptr<CollectiveJob> job);

  // A client attached: numbering restarts at 1. Refused (false) when one is attached.
  bool Attach();
  // The client went away: its queued jobs fail, and until the next Attach the ring's
  // collectives are answered with an abort naming this rank. (Before the first Attach
  // they wait: training processes start a little apart.)
  void Detach(const absl::Status& why);

  ExecutorCounters counters() const;

 private:
  void Loop(std::stop_token stop);
  std::shared_ptr<CollectiveJob> NextJob(absl::Duration wait);
  void Run(CollectiveJob& job);
  absl::Status RunOnRing(CollectiveJob& job, RingEpoch& epoch);
  void RefuseRingCollective();
  void Record(const absl::Status& status);

  const std::string worker_id_;
  RingManager& ring_;
  Reducer& reducer_;
  const size_t segment_bytes_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<CollectiveJob>> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t next_client_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  // Set when an attached client went away; until then (start-up) the ring's collectives
  // wait for the first client instead of being refused.
  absl::Status detached_reason_ ABSL_GUARDED_BY(mu_);
  ExecutorCounters counters_ ABSL_GUARDED_BY(mu_);

  std::jthread thread_;  // last: stops first
};

}  // namespace ringsync
