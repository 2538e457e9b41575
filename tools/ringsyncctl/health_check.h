// `ringsyncctl health TARGET`: one grpc.health.v1.Health/Check call.
#pragma once

#include "wire/security/transport_security.h"

#include <string>

#include "absl/time/time.h"

namespace ringsync {

struct HealthResult {
  bool serving = false;
  std::string status;  // SERVING, NOT_SERVING, UNKNOWN, or the gRPC error code's name
  std::string detail;  // why, when not serving
};

// Asks `target` (host:port or unix:/path) whether `service` ("" = the whole server)
// serves, within `timeout`.
// `security`: what to present on TCP targets (plain by default).
HealthResult CheckHealth(const std::string& target, const std::string& service,
                         const TransportSecurity& security,
                         absl::Duration timeout);

// {"target":...,"service":...,"serving":true,"status":"SERVING","detail":""}
std::string HealthJson(const std::string& target, const std::string& service,
                       const HealthResult& result);

}  // namespace ringsync
