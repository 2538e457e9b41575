// --http_listen and --http_port_file, shared by both ringsyncd roles: where the
// operator's HTTP endpoint (/metrics, /healthz, /readyz) listens, and where to write the
// bound address when the port was 0.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "daemon/http/http_endpoint.h"

ABSL_DECLARE_FLAG(std::string, http_listen);
ABSL_DECLARE_FLAG(std::string, http_port_file);

namespace ringsync {

// Starts the endpoint --http_listen names and writes its bound HOST:PORT to
// --http_port_file when that is set. Null (and OK) when --http_listen is empty.
absl::StatusOr<std::unique_ptr<HttpEndpoint>> StartHttpEndpointFromFlags(
    std::function<std::string()> metrics, std::function<absl::Status()> readiness);

}  // namespace ringsync
