#include "daemon/coordinator/coordinator_server.h"

#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "wire/grpc_options.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace ringsync {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorOptions& options) {
  if (absl::Status s = ValidateCoordinatorOptions(options); !s.ok()) return s;
  absl::StatusOr<std::string> target = NormalizeTarget(options.listen, PortUse::kListen);
  if (!target.ok()) return target.status();

  // Serves grpc.health.v1.Health ("" is SERVING until shutdown). Process-wide setting:
  // it must precede building the server.
  grpc::EnableDefaultHealthCheckService(true);

  auto server = absl::WrapUnique(new CoordinatorServer());
  server->service_ = std::make_unique<CoordinatorService>(options);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder, options.max_message_bytes, options.keepalive);
  ListeningPort port;
  port.Add(builder, *target, options.security.ServerCredentials(options.refusals));
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    server->service_->BeginShutdown();
    return absl::UnavailableError(absl::StrCat(
        "could not start the coordinator on ", options.listen,
        " (address in use, or not an address of this machine?); pick another --listen"));
  }
  absl::StatusOr<std::string> bound = port.BoundAddress();
  if (!bound.ok()) {
    server->Shutdown(absl::ZeroDuration());
    return absl::UnavailableError(
        absl::StrCat("coordinator: ", bound.status().message(), "; pick another --listen"));
  }
  server->address_ = *std::move(bound);
  return server;
}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
  server_.reset();
  service_.reset();
}

void CoordinatorServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (service_ != nullptr) service_->BeginShutdown();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

}  // namespace ringsync
