// HOST:PORT — how every flag, configuration field and request names a TCP endpoint.
// Checked in one place so that a typo fails at once, naming what is wrong, everywhere:
// handed to gRPC unchecked, "host:99999" connects to port 34463 and "host:abc" or
// "[::1:80" fail only when a connection is tried, after a minute of retries.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringsync {

// The longest address accepted: a 253-byte DNS name, a colon and a 5-digit port.
inline constexpr size_t kMaxHostPortBytes = 260;

struct HostPort {
  std::string host;  // a DNS name, a dotted IPv4 address or an IPv6 address (no brackets)
  int port = 0;

  bool is_ipv6() const;
  // An IP address rather than a name to resolve.
  bool is_address() const;
  // 0.0.0.0 or ::, which a server listens on and nobody can connect to.
  bool is_wildcard() const;
  // "host:port", an IPv6 host in brackets.
  std::string ToString() const;
};

// What the port is for: an address to connect to needs 1..65535; one to listen on may
// also say 0, any free port.
enum class PortUse { kConnect, kListen };

// Parses HOST:PORT where HOST is a DNS name (labels of [A-Za-z0-9_-]), a dotted IPv4
// address or an IPv6 address in brackets. InvalidArgument otherwise, saying which part
// is wrong and what is expected; callers prefix the flag or field it came from.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, PortUse use);

// A host alone (as --advertise_host names one): a DNS name, a dotted IPv4 address or an
// IPv6 address with or without brackets. Returns it without brackets.
absl::StatusOr<std::string> ParseHost(absl::string_view host);

}  // namespace ringsync
