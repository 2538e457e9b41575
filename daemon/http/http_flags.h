// --http_listen and --http_port_file, shared by both ringsyncd roles: where the
// operator's HTTP endpoint (/metrics, /healthz, /readyz) listens, and where to write the
// bound address when the port was 0, and how much of it one client may hold.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/http/http_endpoint.h"

ABSL_DECLARE_FLAG(std::string, http_listen);
ABSL_DECLARE_FLAG(std::string, http_port_file);
ABSL_DECLARE_FLAG(int, http_max_connections);
ABSL_DECLARE_FLAG(absl::Duration, http_read_timeout);

namespace ringsync {
namespace metrics {
class Refusals;
}

// Starts the endpoint --http_listen names and writes its bound HOST:PORT to
// --http_port_file when that is set. Null (and OK) when --http_listen is empty.
// Refused connections are counted in `refusals` (null: not counted).
absl::StatusOr<std::unique_ptr<HttpEndpoint>> StartHttpEndpointFromFlags(
    std::function<std::string()> metrics, std::function<absl::Status()> readiness,
    metrics::Refusals* refusals, std::string bearer_token);

// Whether --http_listen is set.
bool HttpEndpointRequested();

}  // namespace ringsync
