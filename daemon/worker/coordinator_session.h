// CoordinatorSession: this worker's membership. It joins the coordinator (retrying
// while the coordinator starts), streams ring views into a callback, and sends a
// heartbeat every interval the coordinator asked for. If the coordinator restarts or
// forgets this worker, it joins again. Stop() leaves cleanly.
//
// Every Join carries this process's incarnation (random, non-zero, the same for the
// session's life: a restarted process replaces its old session at once) and the newest
// view the session received, so that a restarted coordinator can adopt the ring the
// workers are in instead of forming a new generation.
//
// Thread-safety: Start and Stop from one thread; callbacks run on the session's threads.
#pragma once

#include "wire/grpc_options.h"
#include "wire/security/transport_security.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "wire/ring_setting.h"
#include "core/sync/steady_deadline.h"
#include "ringsync/v1/coordinator.grpc.pb.h"

namespace ringsync {

struct CoordinatorSessionOptions {
  std::string coordinator_target;
  std::string worker_id;
  std::string peer_address;
  std::string http_address;
  absl::Duration join_timeout = absl::Seconds(60);
  // The newest ring generation this worker has seen, reported when (re)joining so that a
  // restarted coordinator numbers its views above it. Null: 0.
  std::function<uint64_t()> known_generation;
  TransportSecurity security;  // how the channel to the coordinator authenticates
  KeepaliveSettings keepalive;  // how a silent coordinator connection is noticed
  // The lease (see RingManager::RenewLease): called with how long this worker may act on
  // its generation, after each Join and heartbeat the coordinator accepted — the time the
  // request was sent plus the lease the coordinator granted (JoinResponse.lease_ms), so
  // a reply that arrives late renews nothing. Not called when the coordinator grants none.
  // `until` is on MonotonicNow's clock.
  std::function<void(absl::Time until)> on_lease_renewed;
  // Called every lease/10 (at most every 100 ms) to publish a lapsed lease.
  std::function<void()> check_lease;
  uint64_t incarnation = 0;    // of this worker process; 0: drawn at random
  // The flags every worker of the ring must set alike, stated in every Join: the
  // coordinator refuses this worker when a live worker sets one otherwise.
  std::vector<RingSetting> ring_settings;
};

class CoordinatorSession {
 public:
  using ViewCallback = std::function<void(const v1::RingView&)>;
  // Fills the progress fields of a heartbeat (ready, generation, counters, last error).
  using ReportCallback = std::function<void(v1::HeartbeatRequest*)>;
  // The coordinator answered that this worker has no live session (it declared the
  // worker dead, or it restarted); called with its message before rejoining.
  using SessionLostCallback = std::function<void(absl::string_view why)>;

  CoordinatorSession(CoordinatorSessionOptions options, ViewCallback on_view,
                     ReportCallback report, SessionLostCallback on_session_lost = nullptr);
  ~CoordinatorSession();

  // Joins (retrying until join_timeout) and starts watching and heartbeating.
  absl::Status Start();
  void Stop();

  uint64_t incarnation() const { return incarnation_; }

 private:
  absl::Status Join(SteadyDeadline deadline);
  // Joins again unless the session `lost_token` was already replaced.
  void Rejoin(uint64_t lost_token, absl::string_view why, SteadyDeadline deadline);
  void WatchLoop(std::stop_token stop);
  // Keeps `view` as the one to report when rejoining if it is the newest seen.
  void Remember(const v1::RingView& view) ABSL_LOCKS_EXCLUDED(mu_);
  void HeartbeatLoop(std::stop_token stop);
  void LeaseLoop(std::stop_token stop);
  // Renews the lease from a request sent at `sent_at` that the coordinator accepted.
  void Renewed(absl::Time sent_at);

  const CoordinatorSessionOptions options_;
  const ViewCallback on_view_;
  const ReportCallback report_;
  const SessionLostCallback on_session_lost_;
  const uint64_t incarnation_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;

  absl::Mutex rejoin_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  uint64_t session_token_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  absl::Duration lease_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();  // none granted
  std::shared_ptr<grpc::ClientContext> watch_context_ ABSL_GUARDED_BY(mu_);
  v1::RingView newest_view_ ABSL_GUARDED_BY(mu_);  // generation 0: none yet
  bool stopped_ = false;

  std::jthread watch_thread_;
  std::jthread heartbeat_thread_;
  std::jthread lease_thread_;
};

}  // namespace ringsync
