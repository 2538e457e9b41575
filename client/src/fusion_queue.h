// FusionQueue: the SDK's async tensor fusion (ClientOptions::fusion), as Horovod does it.
// With fusion on, every collective the Client starts goes through this queue, in call
// order; consecutive async all-reduces of one dtype, op and scales are packed into one
// fused all-reduce (fused_call.h) and each caller's handle completes with its own
// tensor's result, or with the batch's error naming its tensor.
//
// Which tensors form a batch must be the same on every rank. Batches end only where the
// program ends them, at the same call on every rank:
//   * when the queued bytes would pass FusionOptions::threshold_bytes (a tensor at least
//     that large goes alone, unfused),
//   * at a call that cannot join (another dtype/op/scales/timeout, any other collective,
//     a grouped call),
//   * when the caller asks for a queued tensor's result (Ready() or Wait() on its handle,
//     or destroying it).
// The cycle time is the one clock-driven trigger: when the oldest queued tensor has
// waited FusionOptions::cycle_time and nothing is in flight, what is queued goes out
// before the program ended the batch — speculatively, since another rank's clock may
// have cut elsewhere. The worker's agreement pass compares the member lists, so ranks
// that cut differently all fail that collective with a mismatch before any byte moved;
// every rank then puts the batch's tensors back at the head of its queue, and sends them
// again only where the program ends the batch (no second speculation for them). A batch
// that fails a mismatch the second time is a real disagreement: its tensors fail with
// the worker's message, which names the tensor. Collectives go one at a time (the next
// is sent when the one before has completed), so that a batch put back still precedes
// everything issued after it.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/collective_call.h"
#include "client/src/pending_collective.h"
#include "ringsync/client.h"
#include "ringsync/collective_handle.h"

namespace ringsync::internal {

class FusionQueue {
 public:
  // Starts `call` now and calls `on_complete` once with its final status (possibly
  // before returning, for a call refused at once).
  using Starter = std::function<void(CollectiveCall call,
                                     std::function<void(const absl::Status&)> on_complete)>;

  // REQUIRES: options.enabled.
  FusionQueue(const FusionOptions& options, Starter start);
  // REQUIRES: Close() was called and the batch in flight has completed.
  ~FusionQueue();

  // Queues `call` behind every collective submitted before it.
  CollectiveHandle Submit(CollectiveCall call);

  // Fails everything still queued CANCELLED (its buffers untouched) and stops sending;
  // the batch in flight completes as the RPC does.
  void Close();

 private:
  struct Entry {
    CollectiveCall call;
    std::shared_ptr<PendingCollective> state;  // the caller's handle
    bool fusible = false;
    uint64_t run = 0;      // entries the program has not separated share a run
    bool retried = false;  // went out in a batch that a mismatch put back
    absl::Time queued_at;  // on MonotonicNow's clock
    size_t bytes = 0;
  };
  using Batch = std::vector<Entry>;

  // The program ended a batch here: what comes next starts a new run.
  void Cut() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the next batch when nothing is in flight and the head of the queue is ready
  // (or, `speculative`, when it may go before the program ended it). The lock is let go
  // while the collective starts.
  void Pump(bool speculative) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many entries at the head form the next batch; 0 when it is not ready.
  size_t ReadyBatch(bool speculative) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnBatchDone(const Batch& batch, bool fused, const absl::Status& status);
  void OnWait();
  void RunTimer();

  const FusionOptions options_;
  const Starter start_;

  absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  // The run new entries join, and what it holds so far (sent or not).
  uint64_t run_ ABSL_GUARDED_BY(mu_) = 0;
  size_t run_entries_ ABSL_GUARDED_BY(mu_) = 0;
  size_t run_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  CollectiveCall run_head_ ABSL_GUARDED_BY(mu_);  // its first entry, whom the others match
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;  // wakes the timer
  std::thread timer_;
};

}  // namespace ringsync::internal
