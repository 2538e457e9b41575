// gRPC settings every ringsync daemon and client shares. The values come from
// measurements of bulk streaming on gRPC 1.51 (see the README's transport notes):
// unlimited message sizes (segments plus header exceed the 4 MiB default), no BDP
// probing with a fixed large stream window (+70-80% in a 4-process ring), default frame
// size, keepalive pings so a silent peer is noticed.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace ringsync {

// Channel arguments for a peer (data-path) connection. Each call gets its own TCP
// connection: separate connections measured faster than streams sharing one.
grpc::ChannelArguments PeerChannelArguments();

// Channel arguments for control-plane connections (coordinator, SDK).
grpc::ChannelArguments ControlChannelArguments();

// Host names resolve through the system's resolver (getaddrinfo: /etc/hosts, then
// what nsswitch.conf says), as for every other program on the host, unless the user
// chose a resolver with GRPC_DNS_RESOLVER. gRPC's default c-ares resolver asks DNS
// servers only after its own timeouts: on hosts whose names live in /etc/hosts and
// that have no DNS server (network namespaces, air-gapped clusters) every connection
// then waits ~3 s. Call first in main(), before any gRPC object exists.
void UseSystemResolverUnlessConfigured();

// Applies the same limits and window settings on the serving side.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

// "unix:/path", "unix:///path", "host:port", "[v6]:port" are accepted; a bare path that
// starts with '/' means a unix socket. Returns a gRPC target string.
absl::StatusOr<std::string> NormalizeTarget(absl::string_view address);

// Opens a listening port on `builder`; returns the address clients should use, with
// the port the kernel chose when `address` asked for port 0.
class ListeningPort {
 public:
  // `credentials`: how the port authenticates callers (plain when null).
  void Add(grpc::ServerBuilder& builder, const std::string& target,
           std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);
  // Valid after BuildAndStart(); error when the port could not be bound.
  absl::StatusOr<std::string> BoundAddress() const;

 private:
  std::string target_;
  int selected_port_ = 0;
};

}  // namespace ringsync
