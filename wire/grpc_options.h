// gRPC settings every ringsync daemon and client shares. The values come from
// measurements of bulk streaming on gRPC 1.51 (see the README's transport notes):
// unlimited message sizes (segments plus header exceed the 4 MiB default), no BDP
// probing with a fixed large stream window (+70-80% in a 4-process ring), default frame
// size, keepalive pings so a silent peer is noticed.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "wire/host_port.h"

namespace ringsync {

// How a connection notices a silent peer (a killed host, a cut link, half-open TCP): a
// keepalive ping after `time` without data, the connection closed when its answer takes
// longer than `timeout`. With keepalive set, gRPC also gives the socket TCP_USER_TIMEOUT
// of `timeout`, so unacknowledged data fails the connection as quickly as a silent ping.
// The daemons take them from --keepalive_time and --keepalive_timeout; every process of
// a cluster should use the same values (a server refuses pings more often than half its
// own keepalive time, and at most every second).
//
// Tuned with the coordinator's lease (its --heartbeat_timeout, 5 s): together they
// exceed it (2 s + 5 s), so a cut shorter than the lease breaks no connection — a ping
// or segment sent into the cut is retransmitted by TCP after it heals, which can take a
// few seconds of TCP's backoff — while a longer cut is found by the lease, and a
// half-open connection by these within a couple of seconds more.
struct KeepaliveSettings {
  absl::Duration time = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(5);
};
// InvalidArgument naming the flags unless both are within 10 ms..1 h.
absl::Status ValidateKeepalive(const KeepaliveSettings& keepalive);

// Channel arguments for a peer (data-path) connection. Each call gets its own TCP
// connection: separate connections measured faster than streams sharing one. Messages
// sent are unbounded here; each server bounds what it receives.
grpc::ChannelArguments PeerChannelArguments(const KeepaliveSettings& keepalive = {});

// Channel arguments for control-plane connections (coordinator, SDK).
grpc::ChannelArguments ControlChannelArguments(const KeepaliveSettings& keepalive = {});

// Host names resolve through the system's resolver (getaddrinfo: /etc/hosts, then
// what nsswitch.conf says), as for every other program on the host, unless the user
// chose a resolver with GRPC_DNS_RESOLVER. gRPC's default c-ares resolver asks DNS
// servers only after its own timeouts: on hosts whose names live in /etc/hosts and
// that have no DNS server (network namespaces, air-gapped clusters) every connection
// then waits ~3 s. Call first in main(), before any gRPC object exists.
void UseSystemResolverUnlessConfigured();

// Bytes a peer message may carry beyond its segment's payload: the frame header with a
// collective spec (a name of up to 1 KiB) or an abort reason (1 KiB).
inline constexpr int kPeerMessageOverheadBytes = 64 << 10;
// Bytes a collective request may carry beyond its inline tensor.
inline constexpr int kRequestOverheadBytes = 64 << 10;

// The serving side's settings: the same window settings as the channels; messages
// larger than `max_receive_message_bytes` refused before they are read whole
// (RESOURCE_EXHAUSTED); the port refused, not shared, when another process holds it
// (gRPC sets SO_REUSEPORT by default: a second daemon on the same port would start
// "fine" and take half of the connections); keepalive pings more often than every second
// without data refused (or more often than half of `keepalive.time`, when that is
// shorter), and the connection closed after two (a flood of pings is work for the server;
// our own channels ping every `keepalive.time`). The server pings its callers as a
// channel does, so it notices a silent caller too.
void ConfigureServerBuilder(grpc::ServerBuilder& builder, int max_receive_message_bytes,
                            const KeepaliveSettings& keepalive = {});

// "unix:/path", "unix:///path", HOST:PORT (ParseHostPort; port 0 only where `use` is
// kListen) and gRPC's own dns:, ipv4:, ipv6: targets are accepted; a bare path that
// starts with '/' means a unix socket. Returns a gRPC target string.
absl::StatusOr<std::string> NormalizeTarget(absl::string_view address, PortUse use);

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
