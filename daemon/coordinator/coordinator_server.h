// CoordinatorServer: a running coordinator — the Coordinator service plus the standard
// grpc.health.v1.Health service on one listening port. Used by `ringsyncd coordinator`
// and by tests, which run it in-process on 127.0.0.1:0.
// Thread-safety: all methods are safe to call from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinator/coordinator_service.h"
#include "grpcpp/server.h"

namespace ringsync {

class CoordinatorServer {
 public:
  // Grace period of Shutdown() when the destructor has to call it.
  static constexpr absl::Duration kDefaultShutdownGrace = absl::Seconds(2);

  // Validates `options`, binds options.listen and starts serving. InvalidArgument for
  // bad options, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const CoordinatorOptions& options);

  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // The bound address, with the kernel's port when options.listen asked for port 0.
  const std::string& address() const { return address_; }

  // The cluster as GetClusterStatus answers it (in-process: the /metrics collector).
  void ClusterStatus(v1::ClusterStatus* out) { service_->ClusterStatus(out); }

  // Ends every watch stream, stops accepting calls and waits up to `grace` for calls in
  // flight, then cancels them. Never hangs on open streams. Idempotent.
  void Shutdown(absl::Duration grace = kDefaultShutdownGrace);

 private:
  CoordinatorServer() = default;

  std::unique_ptr<CoordinatorService> service_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringsync
