#include "daemon/coordinator/coordinator_main.h"

#include <cstring>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/coordinator_server.h"
#include "daemon/coordinator/membership.h"
#include "daemon/http/http_flags.h"
#include "daemon/logging/log_flags.h"
#include "daemon/metrics/build_info.h"
#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/text_page.h"
#include "daemon/process/port_file.h"
#include "daemon/process/stop_signals.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7400",
          "coordinator: HOST:PORT to serve workers on (Coordinator and grpc.health.v1.Health "
          "services). Port 0 picks a free port; see --port_file. Use 0.0.0.0:7400 to accept "
          "workers from other machines.");
ABSL_FLAG(int, world_size, 0,
          "coordinator (required): number of workers in the ring, 1..1024. The ring forms when "
          "this many workers have joined; further joins are refused.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(5),
          "coordinator: a worker that sends no heartbeat for this long is lost and the ring "
          "dissolves (a worker whose WatchRing stream breaks is lost at once).");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "coordinator: how often workers are told to send heartbeats; must be shorter than "
          "--heartbeat_timeout.");

namespace ringsync {
namespace {

// Every coordinator call but WatchRing finishes in microseconds, and watch streams are
// ended first; what remains at shutdown is idle connections, which gRPC closes at this
// deadline if their clients have not closed them.
constexpr absl::Duration kShutdownGrace = absl::Seconds(1);

absl::Status ReadOptions(CoordinatorOptions* options) {
  if (absl::Status s = ValidateLogFlags(); !s.ok()) return s;
  options->listen = absl::GetFlag(FLAGS_listen);
  options->world_size = absl::GetFlag(FLAGS_world_size);
  options->heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  options->heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  if (options->world_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world_size is required: the number of workers in the ring, 1..",
        Membership::kMaxWorldSize));
  }
  return ValidateCoordinatorOptions(*options);
}

}  // namespace

int RunCoordinatorMain() {
  InitLogging("coordinator");
  CoordinatorOptions options;
  if (absl::Status s = ReadOptions(&options); !s.ok()) {
    spdlog::error("{}; see 'ringsyncd --help'", std::string(s.message()));
    return 2;
  }

  // Before any thread starts, so that every thread inherits the blocked stop signals.
  const StopSignals stop_signals;

  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(options);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  const std::string address = (*server)->address();

  // /metrics, /healthz, /readyz (--http_listen): ready while the gRPC server serves.
  prometheus::Registry registry;
  metrics::AddBuildInfo(registry);
  const metrics::ProcessCollector process_metrics;
  const CoordinatorCollector coordinator_metrics(**server);
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http = StartHttpEndpointFromFlags(
      [&] { return metrics::TextPage({&registry, &process_metrics, &coordinator_metrics}); },
      [] { return absl::OkStatus(); });
  if (!http.ok()) {
    spdlog::error("{}", std::string(http.status().message()));
    (*server)->Shutdown(kShutdownGrace);
    return http.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }

  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, address); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      (*server)->Shutdown(kShutdownGrace);
      return 1;
    }
  }
  spdlog::info("coordinator serving on {}: world_size {}, heartbeat interval {}, timeout {}{}",
               address, options.world_size, absl::FormatDuration(options.heartbeat_interval),
               absl::FormatDuration(options.heartbeat_timeout),
               *http == nullptr ? std::string()
                                : absl::StrCat("; metrics on http://", (*http)->address(), "/metrics"));

  const int signal_number = stop_signals.Await();
  spdlog::info("received {}, shutting down", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  if (*http != nullptr) (*http)->Stop();  // its collector reads the server
  (*server)->Shutdown(kShutdownGrace);
  server->reset();
  spdlog::info("coordinator stopped");
  return 0;
}

}  // namespace ringsync
