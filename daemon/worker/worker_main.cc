#include "daemon/worker/worker_main.h"

#include <unistd.h>

#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/reduce/reducer_factory.h"
#include "daemon/http/http_flags.h"
#include "daemon/logging/log_context.h"
#include "daemon/logging/log_flags.h"
#include "daemon/logging/string_view_formatter.h"
#include "daemon/metrics/build_info.h"
#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/text_page.h"
#include "daemon/process/port_file.h"
#include "daemon/process/stop_signals.h"
#include "daemon/transport/grpc/peer_service.h"
#include "daemon/worker/collective_executor.h"
#include "daemon/worker/coordinator_session.h"
#include "daemon/worker/grpc_link_factory.h"
#include "daemon/worker/ring_manager.h"
#include "daemon/worker/worker_metrics.h"
#include "daemon/worker/worker_service.h"
#include "spdlog/spdlog.h"
#include "wire/grpc_options.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7400",
          "worker: HOST:PORT of the ringsyncd coordinator to join.");
ABSL_FLAG(std::string, worker_id, "",
          "worker: this worker's unique id in the cluster (default: HOSTNAME-PID). Ranks are "
          "assigned in the sorted order of worker ids.");
ABSL_FLAG(std::string, peer_listen, "127.0.0.1:0",
          "worker: HOST:PORT for the ring's peer streams (port 0 picks a free port). Use "
          "0.0.0.0:PORT with --advertise_host for workers on several machines.");
ABSL_FLAG(std::string, advertise_host, "",
          "worker: host name or address other workers use to reach --peer_listen (default: "
          "the host of --peer_listen).");
ABSL_FLAG(std::string, socket, "",
          "worker: unix socket path the training process connects to (default "
          "/tmp/ringsync-WORKER_ID.sock).");
ABSL_FLAG(std::string, client_listen, "",
          "worker: optional HOST:PORT to also serve the training process over TCP (tensors "
          "then travel inline; shared memory needs the unix socket).");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "worker: default deadline of one collective, from the request to its result, when "
          "the client sets none.");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(30),
          "worker: how long to wait for the ring neighbours to connect after a new ring view.");
ABSL_FLAG(absl::Duration, join_timeout, absl::Seconds(60),
          "worker: how long to keep trying to join the coordinator at start-up.");
ABSL_FLAG(int64_t, segment_bytes, 1 << 20,
          "worker: bytes per ring segment (pipelining unit). 1-4 MiB suits gRPC; every rank "
          "must use the same value.");
ABSL_FLAG(std::string, reduce_device, "auto",
          "worker: where to reduce: auto (a CUDA GPU when one is usable, else the CPU), cpu, "
          "cuda or cuda:N. 'cuda' without a usable GPU fails at start-up.");
ABSL_FLAG(std::string, shm_dir, "/dev/shm",
          "worker: directory whose ringsync-* files clients may name as shared tensors.");

namespace ringsync {
namespace {

struct WorkerConfig {
  std::string worker_id;
  std::string socket_path;
  std::string coordinator;
};

absl::StatusOr<WorkerConfig> ReadConfig() {
  if (absl::Status s = ValidateLogFlags(); !s.ok()) return s;
  WorkerConfig config;
  config.worker_id = absl::GetFlag(FLAGS_worker_id);
  if (config.worker_id.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    config.worker_id = absl::StrCat(host, "-", ::getpid());
  }
  config.socket_path = absl::GetFlag(FLAGS_socket);
  if (config.socket_path.empty()) {
    config.socket_path = absl::StrCat("/tmp/ringsync-", config.worker_id, ".sock");
  }
  absl::StatusOr<std::string> coordinator = NormalizeTarget(absl::GetFlag(FLAGS_coordinator));
  if (!coordinator.ok()) return coordinator.status();
  config.coordinator = *coordinator;
  if (absl::GetFlag(FLAGS_segment_bytes) < 64 || absl::GetFlag(FLAGS_segment_bytes) > (64 << 20)) {
    return absl::InvalidArgumentError("--segment_bytes must be between 64 and 64 MiB");
  }
  if (absl::GetFlag(FLAGS_collective_timeout) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--collective_timeout must be positive");
  }
  return config;
}

// The address others dial: --advertise_host with the bound port.
std::string AdvertisedAddress(const std::string& bound) {
  const std::string host = absl::GetFlag(FLAGS_advertise_host);
  if (host.empty()) return bound;
  return absl::StrCat(host, bound.substr(bound.rfind(':')));
}

}  // namespace

int RunWorkerMain() {
  InitLogging("worker");
  absl::StatusOr<WorkerConfig> config = ReadConfig();
  if (!config.ok()) {
    spdlog::error("{}; see 'ringsyncd --help'", config.status().message());
    return 2;
  }
  // Fail now, not at the first collective, when the reduction device is unusable.
  absl::StatusOr<ReducerChoice> choice = ChooseReducer(absl::GetFlag(FLAGS_reduce_device));
  if (!choice.ok()) {
    spdlog::error("--reduce_device={}: {}", absl::GetFlag(FLAGS_reduce_device),
                  choice.status().message());
    return 2;
  }
  std::unique_ptr<Reducer> reducer = std::move(choice->reducer);
  SetLogWorkerId(config->worker_id);
  spdlog::info("worker {}: reducing on {} ({})", config->worker_id, reducer->name(), choice->reason);
  const StopSignals stop_signals;

  // The peer server: the ring's data path.
  InboxRegistry registry(/*inbox_capacity=*/4);
  PeerService peer_service(registry);
  grpc::ServerBuilder peer_builder;
  ConfigureServerBuilder(peer_builder);
  ListeningPort peer_port;
  absl::StatusOr<std::string> peer_target = NormalizeTarget(absl::GetFlag(FLAGS_peer_listen));
  if (!peer_target.ok()) {
    spdlog::error("--peer_listen: {}", peer_target.status().message());
    return 2;
  }
  peer_port.Add(peer_builder, *peer_target);
  peer_builder.RegisterService(&peer_service);
  std::unique_ptr<grpc::Server> peer_server = peer_builder.BuildAndStart();
  absl::StatusOr<std::string> peer_address = peer_port.BoundAddress();
  if (peer_server == nullptr || !peer_address.ok()) {
    spdlog::error("cannot serve peers on {}", absl::GetFlag(FLAGS_peer_listen));
    return 1;
  }

  GrpcLinkFactory links(config->worker_id, registry);
  RingManager ring(config->worker_id, links, absl::GetFlag(FLAGS_connect_timeout));
  prometheus::Registry metrics;
  metrics::AddBuildInfo(metrics);
  const metrics::ProcessCollector process_metrics;
  WorkerMetrics worker_metrics(metrics, ring, reducer->name());
  CollectiveExecutor executor(config->worker_id, ring, *reducer,
                              static_cast<size_t>(absl::GetFlag(FLAGS_segment_bytes)),
                              &worker_metrics);
  WorkerServiceOptions service_options;
  service_options.worker_id = config->worker_id;
  service_options.reduce_device = reducer->name();
  service_options.shm_dir = absl::GetFlag(FLAGS_shm_dir);
  service_options.default_timeout = absl::GetFlag(FLAGS_collective_timeout);
  WorkerService worker_service(service_options, ring, executor);

  // The client server: the SDK's unix socket (and optional TCP port), plus health.
  grpc::EnableDefaultHealthCheckService(true);
  ::unlink(config->socket_path.c_str());  // a stale socket of a previous run
  grpc::ServerBuilder client_builder;
  ConfigureServerBuilder(client_builder);
  ListeningPort socket_port, tcp_port;
  socket_port.Add(client_builder, absl::StrCat("unix:", config->socket_path));
  const std::string client_listen = absl::GetFlag(FLAGS_client_listen);
  if (!client_listen.empty()) tcp_port.Add(client_builder, client_listen);
  client_builder.RegisterService(&worker_service);
  std::unique_ptr<grpc::Server> client_server = client_builder.BuildAndStart();
  if (client_server == nullptr) {
    spdlog::error("cannot serve clients on {}", config->socket_path);
    return 1;
  }

  // /metrics, /healthz, /readyz (--http_listen): ready when in a formed ring.
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http = StartHttpEndpointFromFlags(
      [&] { return metrics::TextPage({&metrics, &process_metrics, &worker_metrics}); },
      [&ring] {
        const RingStatus status = ring.Status();
        if (status.ready) return absl::OkStatus();
        return absl::UnavailableError(absl::StrCat("generation ", status.generation, ": ",
                                                   status.detail));
      });
  if (!http.ok()) {
    spdlog::error("{}", http.status().message());
    client_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    peer_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    ::unlink(config->socket_path.c_str());
    return http.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string http_address = *http == nullptr ? "" : AdvertisedAddress((*http)->address());

  const std::string advertised = AdvertisedAddress(*peer_address);
  CoordinatorSessionOptions session_options{config->coordinator, config->worker_id, advertised,
                                            http_address, absl::GetFlag(FLAGS_join_timeout),
                                            [&ring] { return ring.Status().generation; }};
  CoordinatorSession session(
      session_options, [&ring](const v1::RingView& view) { ring.OnView(view); },
      [&ring, &executor](v1::HeartbeatRequest* report) {
        const RingStatus status = ring.Status();
        const ExecutorCounters counters = executor.counters();
        report->set_generation(status.generation);
        report->set_ready(status.ready);
        report->set_collectives_completed(counters.completed);
        report->set_collectives_failed(counters.failed);
        report->set_last_error(counters.last_error);
      },
      [&ring](absl::string_view why) { ring.Suspend(why); });
  if (absl::Status s = session.Start(); !s.ok()) {
    spdlog::error("{}", s.message());
    client_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    peer_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    ::unlink(config->socket_path.c_str());
    return 1;
  }
  spdlog::info("worker {} serving training process on unix:{}{}; ring peers on {}{}",
               config->worker_id, config->socket_path,
               client_listen.empty() ? "" : absl::StrCat(" and ", client_listen), advertised,
               *http == nullptr ? ""
                                : absl::StrCat("; metrics on http://", (*http)->address(), "/metrics"));
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, advertised); !s.ok()) {
      spdlog::error("{}", s.message());
      return 1;
    }
  }

  const int signal_number = stop_signals.Await();
  spdlog::info("worker {}: signal {} received, shutting down", config->worker_id, signal_number);
  if (*http != nullptr) (*http)->Stop();  // its callbacks read the ring
  worker_service.Stop();
  session.Stop();
  ring.Shutdown();
  client_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  peer_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  ::unlink(config->socket_path.c_str());
  return 0;
}

}  // namespace ringsync
