// RingManager: this worker's view of the ring. It turns each ring view the coordinator
// publishes into a RingEpoch — this worker's rank and the link of that generation, which
// a LinkFactory connects in the background — and retires the previous epoch, cancelling
// any collective still running on it with the reason.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/sync/monotonic_clock.h"
#include "core/sync/wait_limit.h"
#include "daemon/worker/epoch_stride_links.h"
#include "daemon/worker/ring_epoch.h"
#include "ringsync/v1/common.pb.h"

namespace ringsync {

// What GetInfo, Attach and heartbeats report.
struct RingStatus {
  int rank = -1;
  int world_size = 0;
  uint64_t generation = 0;
  uint64_t membership = 0;  // RingMembership's id
  bool ready = false;
  std::string detail;  // why not ready, when it is not
  uint64_t version = 0;  // bumps on every change
};

// How a ring connection that failed is tried again: the first pause, doubling up to `max`.
struct ConnectRetry {
  absl::Duration first = absl::Milliseconds(200);
  absl::Duration max = absl::Seconds(2);
};

// The strides whose links to connect as soon as a ring of `world_size` forms (see
// EpochStrideLinks), e.g. StridesToConnectAhead under the executor's policy.
using StridesAhead = std::function<std::vector<int>(int world_size)>;

class RingManager final : public EpochSource {
 public:
  // `links` must outlive this. `connect_timeout`: one attempt to connect a generation's
  // link, and the time the links of `strides_ahead` have, after it formed, to connect
  // on the same thread (the ring is ready meanwhile); `retry`: the pauses between
  // attempts. Without `strides_ahead` every stride link is connected on its first use.
  RingManager(std::string worker_id, LinkFactory& links, absl::Duration connect_timeout,
              ConnectRetry retry = {}, StridesAhead strides_ahead = nullptr);
  ~RingManager();

  // Applies a view from the coordinator; older or repeated generations are ignored,
  // except that they end a suspension (see Suspend).
  void OnView(const v1::RingView& view);

  // The coordinator no longer knows this worker's session. Either it declared the
  // worker dead (a cut link, a stalled process) and has already replaced this
  // generation with views the worker never received, or it restarted. Until its next
  // view tells which, no new collective starts on the current epoch (one started now
  // would wait for ranks that have moved on); collectives in flight continue. A newer
  // generation then replaces the epoch as usual; an older or equal one (a restarted
  // coordinator) resumes it.
  void Suspend(absl::string_view why);

  // The lease: the coordinator keeps this worker in its ring only while heartbeats
  // arrive (its --heartbeat_timeout). A worker that could not renew it in time (it was
  // frozen, or cut off) may have been replaced already, so from `until` on it fences
  // itself: no collective starts on its epoch and it reports not ready, until a renewal
  // (a heartbeat the coordinator accepted, sent before the new `until` minus the lease)
  // or a view says the generation is still current. Without a renewal the lease never
  // lapses (a coordinator that grants none). `until` is on MonotonicNow's clock
  // (core/sync/monotonic_clock.h): a step of the system clock neither lapses the lease
  // early nor stretches it.
  void RenewLease(absl::Time until);
  // Publishes a lapse (not ready, with why) if the lease ran out; the session calls it
  // often. Readiness itself never waits for this: a lapsed lease fences at once.
  void CheckLease();

  // The ready epoch; waits within `limit` while the ring is forming, connecting,
  // suspended or fenced (see RenewLease). Fails at once (Unavailable, naming the view's reason: the lost worker)
  // when the newest view leaves this worker out — the ring dissolved — instead of sitting
  // out the limit: nothing will run until the coordinator forms a new ring, and the
  // ranks that were running with this one have failed already.
  absl::StatusOr<std::shared_ptr<RingEpoch>> AwaitReady(const WaitLimit& limit) override;
  // The ready epoch or null, without waiting.
  std::shared_ptr<RingEpoch> Ready() override;
  MembershipSnapshot Membership() override;

  RingStatus Status() const;
  // Stride links this worker has connected, over every generation (a metric).
  uint64_t stride_links_connected() const { return stride_links_connected_.load(); }
  // Waits up to `wait` for Status().version to differ from `seen`.
  RingStatus AwaitChange(uint64_t seen, absl::Duration wait) const;

  // Retires everything (worker shutdown).
  void Shutdown();

 private:
  // Connects `epoch`'s link (on the connector thread), trying again after a failure
  // until it succeeds or the generation ends; then the links of `strides_ahead_`.
  void Connect(std::shared_ptr<RingEpoch> epoch);
  // Sets up `epoch`'s stride links once its link is connected, marks it ready unless
  // suspended; the links, to connect ahead of their first use.
  EpochStrideLinks& Form(RingEpoch& epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStatus(RingStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // status_, fenced when the lease lapsed though CheckLease has not published it yet.
  RingStatus StatusLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Resume(uint64_t coordinator_generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current epoch is connected, not suspended, and the lease held: collectives may
  // start on it.
  bool IsReady() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool LeaseLapsed() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return MonotonicNow() >= lease_until_;
  }
  // Why this worker is fenced, for the status and the log.
  std::string FencedDetail() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Status: ready, no detail; or fenced when the lease lapsed.
  void MarkReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string worker_id_;
  LinkFactory& links_;
  std::atomic<uint64_t> stride_links_connected_{0};
  const absl::Duration connect_timeout_;
  const ConnectRetry retry_;
  const StridesAhead strides_ahead_;

  mutable absl::Mutex mu_;
  std::shared_ptr<RingEpoch> epoch_ ABSL_GUARDED_BY(mu_);  // current generation, ready or not
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
  bool left_out_ ABSL_GUARDED_BY(mu_) = false;  // the newest view has no place for this worker
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // On MonotonicNow's clock.
  absl::Time lease_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time lease_renewed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // last RenewLease
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;  // a lapse was published (CheckLease)
  RingMembership membership_ ABSL_GUARDED_BY(mu_);
  RingStatus status_ ABSL_GUARDED_BY(mu_);
  absl::Mutex connector_mu_;
  std::jthread connector_ ABSL_GUARDED_BY(connector_mu_);  // connects the newest epoch
};

}  // namespace ringsync
