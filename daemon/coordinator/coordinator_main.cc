#include "daemon/coordinator/coordinator_main.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/coordinator_server.h"
#include "daemon/coordinator/membership.h"
#include "daemon/http/http_flags.h"
#include "daemon/logging/log_flags.h"
#include "daemon/logging/string_view_formatter.h"
#include "daemon/metrics/build_info.h"
#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/refusals.h"
#include "daemon/security/security_flags.h"
#include "daemon/metrics/text_page.h"
#include "daemon/process/port_file.h"
#include "daemon/process/stop_signals.h"
#include "daemon/transport/grpc/keepalive_flags.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7400",
          "coordinator: HOST:PORT to serve workers on (Coordinator and grpc.health.v1.Health "
          "services). Port 0 picks a free port; see --port_file. Use 0.0.0.0:7400 to accept "
          "workers from other machines.");
ABSL_FLAG(int, world_size, 0,
          "coordinator: number of workers in a fixed-size ring, 1..1024 (the same as "
          "--min_world_size=N --max_world_size=N). The ring forms when this many workers have "
          "joined; further joins are refused; losing one dissolves it until it is back. Give "
          "either this or --max_world_size.");
ABSL_FLAG(int, min_world_size, 0,
          "coordinator: elastic ring: the fewest workers the ring forms or stays formed with, "
          "1..--max_world_size (default 1). When a member is lost and at least this many remain, "
          "the ring re-forms with them at once; below it the ring dissolves.");
ABSL_FLAG(int, max_world_size, 0,
          "coordinator: elastic ring: the most workers in the ring, 1..1024; further joins are "
          "refused. The ring forms at once when this many are live, or with at least "
          "--min_world_size once no worker has joined for --formation_grace; later arrivals "
          "are admitted the same way.");
ABSL_FLAG(absl::Duration, formation_grace, absl::Seconds(1),
          "coordinator: how long arrivals must pause before a ring of fewer than "
          "--max_world_size workers forms or grows (several arrivals then cost one re-form), "
          "0s..10m.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(5),
          "coordinator: a worker's lease: one that sends no heartbeat for this long is lost and "
          "the ring re-forms without it (a worker whose WatchRing stream breaks is lost at "
          "once).");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "coordinator: how often workers are told to send heartbeats; must be shorter than "
          "--heartbeat_timeout.");
ABSL_FLAG(int, max_message_bytes, 1 << 20,
          "coordinator: largest request accepted (4 KiB..64 MiB); a larger one is refused "
          "with RESOURCE_EXHAUSTED before it is read. Workers' requests are a few hundred "
          "bytes.");

namespace ringsync {
namespace {

// Exit codes of RunCoordinatorMain (coordinator_main.h).
constexpr int kServing = 0;  // served until a stop signal
constexpr int kFailed = 1;
constexpr int kBadFlags = 2;

// Every coordinator call but WatchRing finishes in microseconds, and watch streams are
// ended first; what remains at shutdown is idle connections, which gRPC closes at this
// deadline if their clients have not closed them.
constexpr absl::Duration kShutdownGrace = absl::Seconds(1);

// --world_size=N is --min_world_size=N --max_world_size=N; the ranges are checked by
// ValidateCoordinatorOptions.
absl::Status ReadWorldSize(CoordinatorOptions* options) {
  const int fixed = absl::GetFlag(FLAGS_world_size);
  const int min = absl::GetFlag(FLAGS_min_world_size);
  const int max = absl::GetFlag(FLAGS_max_world_size);
  if (fixed != 0 && (min != 0 || max != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give either --world_size=", fixed, " (a fixed-size ring) or --min_world_size and "
        "--max_world_size (an elastic ring), not both"));
  }
  if (fixed != 0) {
    options->min_world_size = options->max_world_size = fixed;
    return absl::OkStatus();
  }
  if (max == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world_size (or --max_world_size) is required: the number of workers in the ring, "
        "1..", Membership::kMaxWorldSize));
  }
  options->max_world_size = max;
  options->min_world_size = min == 0 ? 1 : min;
  return absl::OkStatus();
}

absl::Status ReadOptions(CoordinatorOptions* options, std::string* http_token) {
  if (absl::Status s = ValidateLogFlags(); !s.ok()) return s;
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFromFlags(HttpEndpointRequested());
  if (!security.ok()) return security.status();
  options->security = std::move(security->transport);
  *http_token = std::move(security->http_token);
  options->listen = absl::GetFlag(FLAGS_listen);
  if (absl::Status s = ReadWorldSize(options); !s.ok()) return s;
  options->formation_grace = absl::GetFlag(FLAGS_formation_grace);
  options->heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  options->heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options->max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  absl::StatusOr<KeepaliveSettings> keepalive = KeepaliveFromFlags();
  if (!keepalive.ok()) return keepalive.status();
  options->keepalive = *keepalive;
  return ValidateCoordinatorOptions(*options);
}

// Logs why start-up failed; returns the exit code that says so.
int StartFailed(int exit_code, absl::string_view why) {
  spdlog::error("{}", why);
  return exit_code;
}

// What the coordinator serves: its gRPC server (Coordinator and health services), then
// the operator's HTTP endpoint, whose collector reads the server, and the port file.
// Start brings them up in that order; Stop takes down whatever Start brought up — after
// a stop signal and after a failed start alike.
class CoordinatorServing {
 public:
  CoordinatorServing(const CoordinatorOptions& options, std::string http_token)
      : options_(options), http_token_(std::move(http_token)) {
    options_.refusals = [this](absl::string_view reason, absl::string_view detail) {
      refusals_.Refuse(reason, detail);
    };
  }

  // kServing once everything is up and the port file is written; otherwise the exit
  // code, with the reason logged.
  int Start();
  void Stop();

 private:
  int StartHttpEndpoint();
  void LogServing() const;

  CoordinatorOptions options_;
  const std::string http_token_;
  prometheus::Registry metrics_;
  metrics::Refusals refusals_{metrics_};  // outlives server_, which counts in it
  std::unique_ptr<CoordinatorServer> server_;
  std::optional<metrics::ProcessCollector> process_metrics_;
  std::optional<CoordinatorCollector> coordinator_metrics_;  // reads server_
  std::unique_ptr<HttpEndpoint> http_;
};

int CoordinatorServing::Start() {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(options_);
  if (!server.ok()) return StartFailed(kFailed, server.status().message());
  server_ = std::move(*server);
  if (const int failed = StartHttpEndpoint(); failed != kServing) return failed;
  // The port file tells a launcher the coordinator is up: whatever it reads of the log then
  // already holds the serving line (its address and its security).
  LogServing();
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, server_->address()); !s.ok()) {
      return StartFailed(kFailed, s.message());
    }
  }
  return kServing;
}

// /metrics, /healthz, /readyz (--http_listen): ready while the gRPC server serves.
int CoordinatorServing::StartHttpEndpoint() {
  metrics::AddBuildInfo(metrics_);
  process_metrics_.emplace();
  coordinator_metrics_.emplace(*server_);
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http = StartHttpEndpointFromFlags(
      [this] {
        return metrics::TextPage({&metrics_, &*process_metrics_, &*coordinator_metrics_});
      },
      [] { return absl::OkStatus(); }, &refusals_, http_token_);
  if (!http.ok()) {
    return StartFailed(http.status().code() == absl::StatusCode::kInvalidArgument ? kBadFlags
                                                                                  : kFailed,
                       http.status().message());
  }
  http_ = std::move(*http);
  return kServing;
}

void CoordinatorServing::LogServing() const {
  spdlog::info("coordinator serving on {} ({}): world size {}, formation grace {}, heartbeat "
               "interval {}, timeout {}{}",
               server_->address(), options_.security.Describe(),
               options_.min_world_size == options_.max_world_size
                   ? absl::StrCat(options_.max_world_size)
                   : absl::StrCat(options_.min_world_size, "..", options_.max_world_size),
               absl::FormatDuration(options_.formation_grace),
               absl::FormatDuration(options_.heartbeat_interval),
               absl::FormatDuration(options_.heartbeat_timeout),
               http_ == nullptr ? std::string()
                                : absl::StrCat("; metrics on http://", http_->address(), "/metrics"));
}

void CoordinatorServing::Stop() {
  if (http_ != nullptr) http_->Stop();  // its collector reads the server
  if (server_ != nullptr) server_->Shutdown(kShutdownGrace);
  server_.reset();
}

}  // namespace

int RunCoordinatorMain() {
  InitLogging("coordinator");
  CoordinatorOptions options;
  std::string http_token;
  if (absl::Status s = ReadOptions(&options, &http_token); !s.ok()) {
    spdlog::error("{}; see 'ringsyncd --help'", std::string(s.message()));
    return kBadFlags;
  }
  // Before any thread starts, so that every thread inherits the blocked stop signals.
  const StopSignals stop_signals;
  CoordinatorServing serving(options, std::move(http_token));
  if (const int failed = serving.Start(); failed != kServing) {
    serving.Stop();
    return failed;
  }
  const int signal_number = stop_signals.Await();
  spdlog::info("received {}, shutting down", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  serving.Stop();
  spdlog::info("coordinator stopped");
  return kServing;
}

}  // namespace ringsync
