#include "daemon/http/http_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "daemon/process/port_file.h"

ABSL_FLAG(std::string, http_listen, "",
          "HOST:PORT of the operator's HTTP endpoint: /metrics (Prometheus), /healthz "
          "(liveness) and /readyz (worker: in a formed ring; coordinator: serving). Off when "
          "empty. Port 0 picks a free port; see --http_port_file. e.g. 127.0.0.1:9400, or "
          "0.0.0.0:9400 for a Prometheus on another machine.");
ABSL_FLAG(std::string, http_port_file, "",
          "If set, write the HTTP endpoint's bound HOST:PORT and a newline to this file "
          "(atomically), so scripts and tests can find a port chosen with --http_listen=HOST:0.");

namespace ringsync {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> StartHttpEndpointFromFlags(
    std::function<std::string()> metrics, std::function<absl::Status()> readiness) {
  const std::string listen = absl::GetFlag(FLAGS_http_listen);
  const std::string port_file = absl::GetFlag(FLAGS_http_port_file);
  if (listen.empty()) {
    if (!port_file.empty()) {
      return absl::InvalidArgumentError("--http_port_file needs --http_listen");
    }
    return std::unique_ptr<HttpEndpoint>();
  }
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint = HttpEndpoint::Start(
      HttpEndpointOptions{listen, std::move(metrics), std::move(readiness)});
  if (!endpoint.ok()) {
    return absl::Status(endpoint.status().code(),
                        absl::StrCat("--http_listen: ", endpoint.status().message()));
  }
  if (!port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, (*endpoint)->address()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--http_port_file: ", s.message()));
    }
  }
  return endpoint;
}

}  // namespace ringsync
