// CollectiveExecutor: runs the attached training process's collectives on the ring,
// one at a time, strictly in the order the client numbered them (client_sequence), so
// an SDK may keep several in flight and every rank still runs them in the same order.
//
// A collective in progress when the client disconnects is aborted on every rank with a
// reason naming this worker. A client that detached and has not come back within
// ExecutorOptions::reattach_grace is gone: every collective the ring starts from then on
// fails on every rank at once, "has no training process attached", instead of waiting
// out its deadline. Within the grace (a restarting training process) the ring's
// collectives wait, and before any client ever attached (a job still starting) too. A
// rank whose client missed collectives catches up with the ring's sequence numbers at
// its next one.
//
// Who runs a job: one thread at a time holds the executor's turn — the executor's own
// thread, or a thread that submitted a job and found the executor idle
// (SubmitAndRunIfIdle). Handing a small collective to another thread costs a thread
// wake-up per rank, a large share of its time on a loaded host.
//
// Thread-safety: all public methods are safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "core/reduce/reducer.h"
#include "core/ring/allreduce_algorithm.h"
#include "core/ring/stride_rank.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/worker/collective_job.h"
#include "daemon/worker/ring_epoch.h"
#include "daemon/worker/worker_metrics.h"

namespace ringsync {

struct ExecutorOptions {
  size_t segment_bytes = size_t{1} << 20;  // RingOptions::segment_bytes
  // How long after its client detached this worker still holds the ring's collectives
  // for a new client, before it fails them.
  absl::Duration reattach_grace = absl::ZeroDuration();
  // Bounds on what the attached client may have queued (received, not yet running), so
  // that one client cannot hold unbounded memory or shared files in the worker.
  size_t max_queued_jobs = 1024;
  uint64_t max_queued_bytes = uint64_t{8} << 30;
  // How long a queued job may wait behind a client_sequence the client has not sent.
  // The SDK sends its requests in order, so a gap closes within milliseconds unless the
  // request was lost; then the jobs behind it fail after this long rather than holding
  // their tensors until their own (up to 24 h) deadline.
  absl::Duration sequence_gap_timeout = absl::Seconds(10);
  // How long telling the right neighbour of a failure may take (RingOptions::
  // abort_notice_timeout), also when forwarding the abort of a collective this rank skips.
  absl::Duration abort_notice_timeout = absl::Seconds(2);
  // Which algorithm all-reduces run (allreduce_algorithm.h): every worker of a ring must
  // have the same, or their all-reduces fail in the agreement pass.
  AlgorithmPolicy algorithm;
};

struct ExecutorCounters {
  uint64_t completed = 0;
  uint64_t failed = 0;
  std::string last_error;
};

class CollectiveExecutor {
 public:
  // `ring` (the daemon's RingManager) and `metrics` (optional), which hears of every
  // collective that finishes, must outlive this.
  CollectiveExecutor(std::string worker_id, EpochSource& ring, Reducer& reducer,
                     ExecutorOptions options, WorkerMetrics* metrics = nullptr);
  ~CollectiveExecutor();  // stops the executor thread

  // Queues a job; it finishes (job->done) with its result. Jobs whose client_sequence was
  // used already, and jobs beyond the queue's bounds, are refused at once: finished with
  // the error this returns (OK when queued).
  absl::Status Submit(std::shared_ptr<CollectiveJob> job);
  // As Submit; and when no thread holds the turn (no job running, the idle ring not being
  // tended) and `job` is the next in the client's order, runs it on the calling thread
  // before returning, never queued (job->done has been called then). The
  // caller must not hold up anything the job waits for, and must return before the
  // executor is destroyed.
  absl::Status SubmitAndRunIfIdle(std::shared_ptr<CollectiveJob> job);
  // ResourceExhausted when a job of `bytes` would not fit in the queue's bounds now.
  absl::Status CheckRoom(uint64_t bytes) const;

  // A client attached: numbering restarts at 1. Refused (false) when one is attached.
  bool Attach();
  // The client went away: its queued jobs fail.
  void Detach(const absl::Status& why);
  // The attached client said it is done: its Detach that follows is a clean one, after
  // which the ring's collectives wait for a new client (no reattach grace applies).
  void ExpectCleanDetach();

  ExecutorCounters counters() const;

 private:
  // Submit and SubmitAndRunIfIdle.
  absl::Status Accept(std::shared_ptr<CollectiveJob> job, bool run_here_if_idle);
  void Loop(std::stop_token stop);
  // Waits up to `wait` for the next job while no other thread holds the turn. False when
  // another thread holds it at the end of the wait; else this thread holds the turn, and
  // `job` is the next job or null (none came).
  bool AwaitTurn(absl::Duration wait, std::shared_ptr<CollectiveJob>& job);
  // Removes and returns the next job in the client's order, if it is queued.
  std::shared_ptr<CollectiveJob> TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseTurn();
  // What the idle executor does for the ring: drops frames left behind and fails the
  // collectives the ring starts while this worker's client is gone.
  void TendIdleRing();
  // Fails the queued jobs that have waited too long for a client_sequence never sent.
  void DropStalledJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRoomLocked(uint64_t bytes) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The ring algorithm of the job's kind over its data.
  absl::Status RunAlgorithm(CollectiveJob& job, RingEpoch& epoch, const RingOptions& options);
  // Runs `run` once all of the job's input has arrived (at once where none is arriving):
  // for the algorithms that read their input whole, unlike the ring.
  absl::Status OnceArrived(CollectiveJob& job, RingEpoch& epoch, absl::Span<const std::byte> data,
                           const RingOptions& options, absl::FunctionRef<absl::Status()> run);
  // Fails a collective this rank gives up before it runs (`why`), telling the others on
  // every link they may wait on.
  absl::Status RejectBeforeRunning(RingEpoch& epoch, const CollectiveSpec& spec,
                                   const RingOptions& options, const absl::Status& why) const;
  // A broadcast's, scatter's, gather's, all-gather's or all-to-all's data over `data`:
  // over the stride links where the buffer is small enough (StrideScheduleToCopy), a large
  // scatter, gather or all-to-all straight between the ranks (DirectTransferSchedule),
  // else `on_the_ring`.
  absl::Status RunCopying(CollectiveJob& job, RingEpoch& epoch, absl::Span<std::byte> data,
                          const RingOptions& options,
                          absl::FunctionRef<absl::Status()> on_the_ring);
  // A reduce-scatter's or a scatter's result: the block of the rank it runs as.
  static void PlaceBlockResult(CollectiveJob& job, const RingMember& me);
  // An uneven all-to-all's result: what follows its input.
  static void PlaceUnevenResult(CollectiveJob& job, const RingMember& me);
  // A broadcast or scatter whose client left its input out, or a gather whose client left
  // its output out, finds this rank is the root: fails it on every rank.
  absl::Status RejectLeftOutRoot(const CollectiveJob& job, RingEpoch& epoch,
                                 const RingOptions& options) const;
  // An all-reduce's `algorithm` over `data` (its input there, or arriving for the ring).
  absl::Status RunAllReduceAlgorithm(AllReduceAlgorithm algorithm, CollectiveJob& job,
                                     RingEpoch& epoch, absl::Span<std::byte> data,
                                     const RingOptions& options);
  void Run(CollectiveJob& job);
  // The algorithm an all-reduce (or barrier) of `spec` runs on `me`'s ring.
  AllReduceAlgorithm AlgorithmOf(const CollectiveSpec& spec, const RingMember& me) const;
  // The stride schedule a collective of `spec` runs over `epoch`'s stride links; nullopt
  // where it runs the ring's algorithm for its kind (or an all-reduce relays).
  std::optional<StrideSchedule> StrideScheduleFor(const CollectiveSpec& spec,
                                                  const RingEpoch& epoch) const;
  // What a collective of `spec` runs on `epoch`'s ring, as metrics name it: an
  // all-reduce's or barrier's AlgorithmName; "direct" or "doubling" for the others over
  // the stride links; else "chain" (broadcast, scatter, gather), "ring" (all-gather,
  // reduce-scatter) or "none" (an all-to-all, refused).
  absl::string_view AlgorithmNameOf(const CollectiveSpec& spec, const RingEpoch& epoch) const;
  absl::Status RunOnRing(CollectiveJob& job, RingEpoch& epoch);
  // Aborted, marked kMembershipChanged, when `job` was issued for a membership of the
  // ring that is gone; OK otherwise. Sets job.membership_now.
  absl::Status FailIfMembershipMoved(CollectiveJob& job) const;
  // The failure of a collective that found no ring (`why`), named after the last ring
  // this worker ran on, when there was one.
  absl::Status NoRing(const CollectiveJob& job, const absl::Status& why) const;
  // Before a collective: skips what the ring left behind and, when the ring has moved
  // past this rank (its client was away while the others ran collectives), catches up
  // with the ring's sequence numbers.
  void AlignWithRing(RingEpoch& epoch);
  // Drops frames of collectives that are over for this rank, and of collectives the ring
  // gave up up to `skip_through`; returns the header of the first frame of a collective
  // still to run, if one is waiting.
  std::optional<Frame> DropLeftovers(RingEpoch& epoch, uint64_t skip_through);
  // Collectives the ring gave up that the current client cannot be issuing: those aborted
  // before it attached (all of them while no client is attached). A collective aborted
  // later is still this client's to run, and fail with the ring's reason.
  uint64_t SkipThrough() const;
  // How long the client that detached has been gone; nullopt while one is attached or
  // before any was.
  std::optional<absl::Duration> ClientGoneFor() const;
  // Fails the collective the ring started (`first`, its first frame) on every rank:
  // this worker's client is gone.
  void FailForAbsentClient(RingEpoch& epoch, const Frame& first, absl::Duration gone_for);
  // Counts a finished collective (heartbeat counters, metrics) and logs a failure once,
  // with its cause.
  // `data_path`: CollectiveJob::data_path.
  void Record(const CollectiveSpec& spec, const RingEpoch* epoch, const RingStats& stats,
              absl::Duration elapsed, const absl::Status& status,
              absl::string_view data_path = "none");

  const std::string worker_id_;
  EpochSource& ring_;
  Reducer& reducer_;
  const ExecutorOptions options_;
  WorkerMetrics* const metrics_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<CollectiveJob>> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // data_bytes() of queued_
  uint64_t next_client_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t aborted_before_attach_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<SteadyStopwatch> detached_ ABSL_GUARDED_BY(mu_);  // started when a client vanished
  bool clean_detach_ ABSL_GUARDED_BY(mu_) = false;
  ExecutorCounters counters_ ABSL_GUARDED_BY(mu_);
  bool turn_taken_ ABSL_GUARDED_BY(mu_) = false;  // a thread runs a job or tends the ring

  // Where the newest collective ran; touched by the thread holding the turn only.
  struct LastRing {
    RingMember me;
    uint64_t next_sequence;
  };
  std::optional<LastRing> last_ring_;
  // The memory shared tensors are staged in, reused from one collective to the next
  // (CollectiveJob::LoadShared); touched by the thread holding the turn only.
  std::vector<std::byte> shared_staging_;

  std::jthread thread_;  // last: stops first
};

}  // namespace ringsync
