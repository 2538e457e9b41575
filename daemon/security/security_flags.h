// The authentication flags of both ringsyncd roles: --tls_ca, --tls_cert, --tls_key,
// --tls_reload_interval, --token_file, --http_token_file and --insecure. A daemon serves
// TCP only authenticated — mutual TLS, a cluster token, or both — unless the operator
// says --insecure, which is logged as a warning.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "wire/security/transport_security.h"

namespace ringsync {

struct DaemonSecurity {
  TransportSecurity transport;  // gRPC ports and the channels this daemon dials
  std::string http_token;       // bearer token of the HTTP port; empty: none (--insecure)
};

// Reads the flags. InvalidArgument naming the flags when none of TLS, a token or
// --insecure was given, when --insecure is combined with them, or when a file is
// unusable. `http_listen`: whether the HTTP port is on (it then needs a token too).
absl::StatusOr<DaemonSecurity> DaemonSecurityFromFlags(bool http_listen);

}  // namespace ringsync
