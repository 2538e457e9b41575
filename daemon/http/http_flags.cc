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
ABSL_FLAG(int, http_max_connections, ringsync::HttpLimits().max_connections,
          "HTTP connections served at once (each holds a thread); one more is refused at once "
          "with 503, counted in ringsync_refused_total{reason=\"http_connection_limit\"}. "
          "1..1024.");
ABSL_FLAG(absl::Duration, http_read_timeout, ringsync::HttpLimits().read_timeout,
          "How long an HTTP client may take to send its whole request; a slower one is "
          "disconnected (ringsync_refused_total{reason=\"http_read_timeout\"}), so slow "
          "clients cannot hold the endpoint. e.g. 5s.");

namespace ringsync {
namespace {

constexpr int kMaxHttpConnections = 1024;

absl::StatusOr<HttpLimits> LimitsFromFlags() {
  HttpLimits limits;
  limits.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  limits.read_timeout = absl::GetFlag(FLAGS_http_read_timeout);
  if (limits.max_connections < 1 || limits.max_connections > kMaxHttpConnections) {
    return absl::InvalidArgumentError(absl::StrCat("--http_max_connections=",
                                                   limits.max_connections, ": use 1..",
                                                   kMaxHttpConnections, ", e.g. 16"));
  }
  if (limits.read_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_read_timeout=", absl::FormatDuration(limits.read_timeout),
                     ": use a positive duration, e.g. 5s"));
  }
  return limits;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> StartHttpEndpointFromFlags(
    std::function<std::string()> metrics, std::function<absl::Status()> readiness,
    metrics::Refusals* refusals, std::string bearer_token) {
  const std::string listen = absl::GetFlag(FLAGS_http_listen);
  const std::string port_file = absl::GetFlag(FLAGS_http_port_file);
  if (listen.empty()) {
    if (!port_file.empty()) {
      return absl::InvalidArgumentError("--http_port_file needs --http_listen");
    }
    return std::unique_ptr<HttpEndpoint>();
  }
  absl::StatusOr<HttpLimits> limits = LimitsFromFlags();
  if (!limits.ok()) return limits.status();
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint = HttpEndpoint::Start(
      HttpEndpointOptions{listen, std::move(metrics), std::move(readiness), *limits, refusals,
                          std::move(bearer_token)});
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

bool HttpEndpointRequested() { return !absl::GetFlag(FLAGS_http_listen).empty(); }

}  // namespace ringsync
