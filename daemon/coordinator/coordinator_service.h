// CoordinatorService: the ringsync.v1.Coordinator gRPC service (callback API), a thin
// layer over Membership. It validates the protocol version, serializes every call into
// Membership under one mutex, logs membership events, and streams each published ring
// view to every open WatchRing.
//
// Liveness: besides heartbeats (checked by a background thread every tick), an open
// WatchRing stream is proof of life: when it breaks (client cancelled, process died,
// connection lost) the worker is treated as dead at once. When a worker's session ends
// (left, lost) its watch streams receive the dissolved view and then end with NOT_FOUND.
//
// Thread-safety: all methods are safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinator/membership.h"
#include "wire/grpc_options.h"
#include "wire/security/transport_security.h"
#include "daemon/metrics/refusals.h"
#include "prometheus/registry.h"
#include "ringsync/v1/coordinator.grpc.pb.h"

namespace ringsync {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7400";  // HOST:PORT (port 0: ephemeral) or unix:PATH
  // The ring forms with min_world_size..max_world_size workers (membership.h):
  // 1 <= min <= max <= Membership::kMaxWorldSize.
  int min_world_size = 1;
  int max_world_size = 1;
  // How long arrivals must pause before a ring of fewer than max_world_size forms or grows.
  absl::Duration formation_grace = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  absl::Duration heartbeat_interval = absl::Seconds(1);  // told to workers in JoinResponse
  // How --listen authenticates callers. With mutual TLS a Join for worker W is accepted
  // only from a certificate that names W (wire/security/peer_identity.h).
  TransportSecurity security;
  RefusalReporter refusals;  // hears of refused callers; null: not reported
  int max_message_bytes = 1 << 20;  // larger requests are refused unread; 4 KiB..64 MiB
  KeepaliveSettings keepalive;       // how a silent worker connection is noticed
};

// InvalidArgument naming the flag when an option is out of range.
absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& options);

// Converts a published view to its wire form, and back (a view a worker reports).
void ToProto(const View& view, v1::RingView* out);
View FromProto(const v1::RingView& view);
// What a Join states, as Membership::Join takes it; `observed_host` is where it came from.
// Lists longer than Membership accepts are cut one past its limit: enough to refuse them.
JoinInfo FromProto(const v1::JoinRequest& request, std::string observed_host);

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // Refused calls are reported to options.refusals; when it is null, counted and logged
  // (rate-limited) by the service's own metrics::Refusals, which nobody scrapes.
  // REQUIRES: ValidateCoordinatorOptions(options).ok().
  explicit CoordinatorService(const CoordinatorOptions& options);
  // REQUIRES: BeginShutdown() was called and the grpc::Server is shut down.
  ~CoordinatorService() override;

  // Ends every watch stream with UNAVAILABLE, refuses new calls and stops the expiry
  // thread. A broken watch no longer counts as a death after this. Idempotent.
  void BeginShutdown();

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request,
                                 v1::JoinResponse* response) override;
  grpc::ServerWriteReactor<v1::RingView>* WatchRing(grpc::CallbackServerContext* context,
                                                    const v1::WatchRingRequest* request) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const v1::LeaveRequest* request,
                                  v1::LeaveResponse* response) override;
  grpc::ServerUnaryReactor* GetClusterStatus(grpc::CallbackServerContext* context,
                                             const v1::GetClusterStatusRequest* request,
                                             v1::ClusterStatus* response) override;

  // What GetClusterStatus answers, for in-process readers (the /metrics collector).
  void ClusterStatus(v1::ClusterStatus* out) { DoGetClusterStatus(out); }

 private:
  class WatchReactor;

  grpc::Status DoJoin(const v1::JoinRequest& request, const std::string& peer,
                      const grpc::AuthContext* auth, v1::JoinResponse* response);
  grpc::Status DoHeartbeat(const v1::HeartbeatRequest& request, v1::HeartbeatResponse* response);
  grpc::Status DoLeave(const v1::LeaveRequest& request, const std::string& peer);
  void DoGetClusterStatus(v1::ClusterStatus* response);

  // Logs Membership's events, streams published views to every watcher, and ends the
  // watch streams of sessions that ended.
  void ProcessEventsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A watch stream of (worker_id, token) broke.
  void OnWatchBroken(const std::string& worker_id, uint64_t session_token)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Unregister(WatchReactor* watcher) ABSL_LOCKS_EXCLUDED(mu_);
  void ExpiryLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void Refuse(absl::string_view reason, absl::string_view detail);

  const CoordinatorOptions options_;
  prometheus::Registry own_metrics_;
  metrics::Refusals own_refusals_{own_metrics_};
  absl::Mutex mu_;
  Membership membership_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<WatchReactor*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t joins_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread expiry_thread_;
};

}  // namespace ringsync
