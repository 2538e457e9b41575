#include "daemon/worker/worker_main.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>

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
#include "daemon/metrics/refusals.h"
#include "daemon/security/security_flags.h"
#include "daemon/metrics/text_page.h"
#include "daemon/process/heap_retention.h"
#include "daemon/process/port_file.h"
#include "daemon/process/stop_signals.h"
#include "daemon/transport/grpc/keepalive_flags.h"
#include "daemon/transport/grpc/peer_service.h"
#include "daemon/worker/collective_executor.h"
#include "daemon/worker/coordinator_session.h"
#include "daemon/worker/grpc_link_factory.h"
#include "daemon/worker/local_peers.h"
#include "daemon/worker/ring_manager.h"
#include "daemon/shm/frame_mailbox.h"
#include "daemon/worker/shm_sweep.h"
#include "daemon/worker/descriptor_inbox.h"
#include "daemon/worker/socket_path.h"
#include "daemon/worker/unix_socket_listener.h"
#include "daemon/worker/worker_metrics.h"
#include "daemon/worker/worker_service.h"
#include "spdlog/spdlog.h"
#include "wire/grpc_options.h"
#include "wire/host_port.h"

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
          "/tmp/ringsync-UID/WORKER_ID.sock, in a directory only this user may enter). The "
          "worker refuses to start when the path or its directory belongs to another user.");
ABSL_FLAG(std::string, client_listen, "",
          "worker: optional HOST:PORT to also serve the training process over TCP (tensors "
          "then travel inline; shared-memory tensors are refused there).");
ABSL_FLAG(int64_t, max_queued_jobs, 1024,
          "worker: most collectives the training process may have queued in the worker "
          "(received, not yet running); more are refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_queued_bytes, int64_t{8} << 30,
          "worker: most tensor bytes (inline or shared) of the training process's queued "
          "collectives; more are refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(absl::Duration, client_sequence_gap_timeout, absl::Seconds(10),
          "worker: how long a queued collective waits for an earlier one (client_sequence) "
          "its client has not sent before it fails, releasing its tensor, rather than "
          "waiting out its own deadline.");
ABSL_FLAG(int64_t, max_inline_bytes, 64 << 20,
          "worker: largest tensor a request may carry inline (over --client_listen, or below "
          "the SDK's shared-memory threshold), 1 KiB..1 GiB; a larger request is refused with "
          "RESOURCE_EXHAUSTED before it is read.");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "worker: default deadline of one collective, from the request to its result, when "
          "the client sets none.");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(30),
          "worker: how long to wait for the ring neighbours to connect after a new ring view.");
ABSL_FLAG(absl::Duration, join_timeout, absl::Seconds(60),
          "worker: how long to keep trying to join the coordinator at start-up.");
ABSL_FLAG(int64_t, segment_bytes, 1 << 20,
          "worker: bytes per ring segment (pipelining unit). 1-4 MiB suits gRPC. Every worker "
          "of a ring must use the same value: the coordinator refuses one that differs.");
ABSL_FLAG(std::string, algorithm, "auto",
          "worker: the all-reduce algorithm: auto (within the relay's sizes and up to "
          "--doubling_max_bytes: the direct exchange on 3..--direct_max_ranks ranks, the "
          "doubling on more; else the relay up to --relay_max_bytes x N/(N-2); else the "
          "ring), ring, relay, doubling or direct (forced, for "
          "benchmarks; buffers larger than the forced algorithm carries run the relay or the "
          "ring). Every worker of a ring must use the same value: the coordinator refuses one "
          "that differs.");
ABSL_FLAG(int64_t, doubling_max_bytes, 64 << 10,
          "worker: the largest all-reduce (bytes, 0..16 MiB; 0: never) the stride algorithms "
          "run: the doubling (every rank's contribution to every rank over links of stride "
          "1, 2, 4, ...: 2 log2 N hops; never more than 1 MiB / (N/2)) and the direct "
          "exchange (to every rank at once: 2 hops); never more than --segment_bytes. Every "
          "worker of a ring must use the same value: the coordinator refuses one that differs.");
ABSL_FLAG(int32_t, direct_max_ranks, 4,
          "worker: with --algorithm=auto, the largest ring (0..16; below 3: never) on which "
          "small all-reduces run the direct exchange (each rank sends to every other rank at "
          "once: N-1 frames a pass, 2 hops) rather than the doubling. Every worker of a ring "
          "must use the same value: the coordinator refuses one that differs.");
ABSL_FLAG(int64_t, relay_max_bytes, 64 << 10,
          "worker: with --algorithm=auto, the relay algorithm's crossover on a large ring "
          "(0..16 MiB): all-reduces of up to this x N/(N-2) bytes (N=2: x16; never more than "
          "--segment_bytes) run the relay (agreement and data in N-1 hops) rather than the "
          "ring. Every worker of a ring must use the same value: the coordinator refuses one that "
          "differs.");
ABSL_FLAG(std::string, reduce_device, "auto",
          "worker: where to reduce: auto (a CUDA GPU when one is usable, else the CPU), cpu, "
          "cuda or cuda:N. 'cuda' without a usable GPU fails at start-up.");
ABSL_FLAG(absl::Duration, client_reattach_grace, absl::ZeroDuration(),
          "worker: how long after its training process detached (exited, was killed) the "
          "worker holds the ring's collectives for a restarted one; after that they fail on "
          "every rank at once, naming this worker, instead of waiting out their deadline. "
          "0 (default): at once — a restarted process starts its collectives afresh anyway, "
          "so holding the others only delays their error.");
ABSL_FLAG(absl::Duration, abort_notice_timeout, absl::Seconds(2),
          "worker: how long a rank that gives up a collective may take to tell its right "
          "neighbour (the abort notice), and how long a rank that ran out of time while its "
          "left neighbour was still sending waits for that neighbour's notice naming the "
          "cause (1ms..1m). A notice to a neighbour that died fails at once.");
ABSL_FLAG(absl::Duration, connect_retry_initial, absl::Milliseconds(200),
          "worker: pause before trying again to connect a ring that failed to connect "
          "(1ms..1m); it doubles after each failure up to --connect_retry_max.");
ABSL_FLAG(absl::Duration, connect_retry_max, absl::Seconds(2),
          "worker: longest pause between attempts to connect a ring (1ms..1m, at least "
          "--connect_retry_initial).");
ABSL_FLAG(absl::Duration, ring_open_attempt, absl::Seconds(2),
          "worker: how long one attempt to open the stream to the right neighbour may wait "
          "for its answer before it is made again on a new connection (10ms..1m; within "
          "--connect_timeout).");
ABSL_FLAG(std::string, shm_dir, "/dev/shm",
          "worker: directory whose ringsync-* files clients may name as shared tensors.");
ABSL_FLAG(bool, shm_sweep, true,
          "worker: at start, remove the SDK's shared tensors (ringsync-<pid>-...) in "
          "--shm_dir that this worker's user owns and whose process is gone (a training "
          "process killed together with its worker). Turn off when training processes run "
          "in another pid namespace and share --shm_dir: their pids mean nothing here.");
ABSL_FLAG(std::string, peer_transport, "auto",
          "worker: how frames and payload travel to the right neighbour: auto (through a "
          "shared-memory slot ring and frame mailbox when the neighbour runs on this host — "
          "same boot id, IPC, pid and network namespaces, user — else on a TCP data connection "
          "beside the gRPC stream, its records sealed with AES-256-GCM under mutual TLS "
          "(--tls_*) by a key only the stream's TLS carried), tcp (a data connection to every "
          "neighbour, on this host too) or grpc (always gRPC bytes). The gRPC stream stays open "
          "for the hello and the neighbour's liveness. With auto, --peer_shm_mailbox_bytes=0 keeps "
          "same-host frames on the stream and only segment payload in shared memory.");
ABSL_FLAG(int32_t, peer_data_port, 0,
          "worker: TCP port for the data connections of the ring streams this worker accepts "
          "(--peer_transport=auto or tcp), on the address of --peer_listen; 0: one the kernel "
          "chooses, told to each sender over its authenticated stream. A connection must present "
          "the one-time key its stream was given before anything is read from it.");
ABSL_FLAG(absl::Duration, shm_spin, absl::Microseconds(300),
          "worker: how long a thread waiting for a same-host neighbour's frame (frame "
          "mailbox) or for its client's next call (call channel) keeps looking, yielding the "
          "CPU between looks, before it sleeps on a futex, 0..10ms; 0 sleeps at once. A frame "
          "that comes within it costs no sleep and wake-up (most of a small collective's time "
          "on a loaded machine), at the price of that thread staying runnable meanwhile.");
ABSL_FLAG(int64_t, peer_shm_mailbox_bytes, int64_t{2} << 20,
          "worker: bytes of the frame mailbox to a same-host right neighbour (--peer_transport="
          "auto), 0 or 1..64 MiB, a multiple of 8; 0 keeps frames on the gRPC stream and only "
          "segment payload in shared memory. Its half is the largest frame it carries (at least "
          "the largest fused-collective header: 1 MiB or more); larger ones take the stream.");
ABSL_FLAG(int64_t, peer_shm_slots, 8,
          "worker: slots of the shared-memory slot ring to a same-host right neighbour, 1..64 "
          "(each holds one segment: --segment_bytes, at least 4 KiB).");
ABSL_FLAG(int64_t, max_registered_buffers, 64,
          "worker: most registered buffers (Client::Allocate) its training process may hold "
          "at once, 0..4096; 0 refuses registration (the SDK then says so).");
ABSL_FLAG(int64_t, max_registered_buffer_bytes, int64_t{16} << 30,
          "worker: largest registered buffer, 1 KiB..1 TiB (the memory is the training "
          "process's; the worker only maps it).");

namespace ringsync {
namespace {

// Exit codes of RunWorkerMain (worker_main.h).
constexpr int kServing = 0;  // served until a stop signal
constexpr int kFailed = 1;
constexpr int kBadFlags = 2;

struct WorkerConfig {
  std::string worker_id;
  std::string socket_path;
  bool default_socket = false;  // socket_path is DefaultSocketPath: its directory is ours
  std::string coordinator;
  // --advertise_host, checked, without brackets; empty: others dial the bound address.
  std::string advertise_host;
  DaemonSecurity security;
  KeepaliveSettings keepalive;  // --keepalive_time, --keepalive_timeout
};

// InvalidArgument naming the flag when a timer is outside its documented range.
absl::Status ValidateTimers() {
  struct Bound {
    const char* flag;
    absl::Duration value, min, max;
  };
  const absl::Duration retry_initial = absl::GetFlag(FLAGS_connect_retry_initial);
  const Bound bounds[] = {
      {"--abort_notice_timeout", absl::GetFlag(FLAGS_abort_notice_timeout),
       absl::Milliseconds(1), absl::Minutes(1)},
      {"--connect_retry_initial", retry_initial, absl::Milliseconds(1), absl::Minutes(1)},
      {"--connect_retry_max", absl::GetFlag(FLAGS_connect_retry_max),
       std::max(absl::Milliseconds(1), retry_initial), absl::Minutes(1)},
      {"--ring_open_attempt", absl::GetFlag(FLAGS_ring_open_attempt), absl::Milliseconds(10),
       absl::Minutes(1)},
      {"--connect_timeout", absl::GetFlag(FLAGS_connect_timeout), absl::Milliseconds(10),
       absl::Hours(24)},
      {"--join_timeout", absl::GetFlag(FLAGS_join_timeout), absl::Milliseconds(10),
       absl::Hours(24)},
  };
  for (const Bound& b : bounds) {
    if (b.value < b.min || b.value > b.max) {
      return absl::InvalidArgumentError(absl::StrCat(
          b.flag, "=", absl::FormatDuration(b.value), " is outside ",
          absl::FormatDuration(b.min), "..", absl::FormatDuration(b.max)));
    }
  }
  return absl::OkStatus();
}

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
    config.socket_path = DefaultSocketPath(config.worker_id);
    config.default_socket = true;
  }
  absl::StatusOr<std::string> coordinator =
      NormalizeTarget(absl::GetFlag(FLAGS_coordinator), PortUse::kConnect);
  if (!coordinator.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator: ", coordinator.status().message()));
  }
  config.coordinator = *coordinator;
  if (const std::string advertise = absl::GetFlag(FLAGS_advertise_host); !advertise.empty()) {
    absl::StatusOr<std::string> host = ParseHost(advertise);
    if (!host.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--advertise_host: ", host.status().message()));
    }
    if (HostPort{*host}.is_wildcard()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--advertise_host=", advertise, " is a wildcard, which other workers cannot reach: "
          "give this machine's name or address"));
    }
    config.advertise_host = *std::move(host);
  }
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFromFlags(HttpEndpointRequested());
  if (!security.ok()) return security.status();
  config.security = *std::move(security);
  if (absl::GetFlag(FLAGS_segment_bytes) < 64 || absl::GetFlag(FLAGS_segment_bytes) > (64 << 20)) {
    return absl::InvalidArgumentError("--segment_bytes must be between 64 and 64 MiB");
  }
  if (!ParseAlgorithmMode(absl::GetFlag(FLAGS_algorithm)).has_value()) {
    return absl::InvalidArgumentError("--algorithm must be auto, ring, relay, doubling or direct");
  }
  if (absl::GetFlag(FLAGS_direct_max_ranks) < 0 ||
      absl::GetFlag(FLAGS_direct_max_ranks) > kDirectRanksLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--direct_max_ranks must be between 0 and ", kDirectRanksLimit));
  }
  if (absl::GetFlag(FLAGS_doubling_max_bytes) < 0 ||
      absl::GetFlag(FLAGS_doubling_max_bytes) > (16 << 20)) {
    return absl::InvalidArgumentError("--doubling_max_bytes must be between 0 and 16 MiB");
  }
  if (absl::GetFlag(FLAGS_relay_max_bytes) < 0 || absl::GetFlag(FLAGS_relay_max_bytes) > (16 << 20)) {
    return absl::InvalidArgumentError("--relay_max_bytes must be between 0 and 16 MiB");
  }
  if (absl::GetFlag(FLAGS_max_inline_bytes) < (1 << 10) ||
      absl::GetFlag(FLAGS_max_inline_bytes) > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--max_inline_bytes must be between 1 KiB and 1 GiB");
  }
  const std::string transport = absl::GetFlag(FLAGS_peer_transport);
  if (transport != "auto" && transport != "tcp" && transport != "grpc") {
    return absl::InvalidArgumentError("--peer_transport must be auto, tcp or grpc");
  }
  if (absl::GetFlag(FLAGS_peer_data_port) < 0 || absl::GetFlag(FLAGS_peer_data_port) > 65535) {
    return absl::InvalidArgumentError("--peer_data_port must be between 0 and 65535");
  }
  if (absl::GetFlag(FLAGS_peer_shm_slots) < 1 || absl::GetFlag(FLAGS_peer_shm_slots) > 64) {
    return absl::InvalidArgumentError("--peer_shm_slots must be between 1 and 64");
  }
  if (absl::GetFlag(FLAGS_shm_spin) < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_shm_spin) > absl::Milliseconds(10)) {
    return absl::InvalidArgumentError("--shm_spin must be between 0 and 10ms");
  }
  if (const int64_t mailbox = absl::GetFlag(FLAGS_peer_shm_mailbox_bytes);
      mailbox != 0 && !FrameMailboxLayout::CheckCapacity(static_cast<uint64_t>(mailbox)).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peer_shm_mailbox_bytes must be 0 or ", FrameMailboxLayout::kMinCapacity, "..",
        FrameMailboxLayout::kMaxCapacity, ", a multiple of 8"));
  }
  if (absl::GetFlag(FLAGS_max_registered_buffers) < 0 ||
      absl::GetFlag(FLAGS_max_registered_buffers) > 4096 ||
      absl::GetFlag(FLAGS_max_registered_buffer_bytes) < (1 << 10) ||
      absl::GetFlag(FLAGS_max_registered_buffer_bytes) > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError("--max_registered_buffers must be between 0 and 4096, "
                                      "--max_registered_buffer_bytes between 1 KiB and 1 TiB");
  }
  if (absl::GetFlag(FLAGS_client_reattach_grace) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--client_reattach_grace must not be negative");
  }
  if (absl::GetFlag(FLAGS_collective_timeout) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--collective_timeout must be positive");
  }
  if (absl::GetFlag(FLAGS_max_queued_jobs) < 1 || absl::GetFlag(FLAGS_max_queued_bytes) < 0) {
    return absl::InvalidArgumentError(
        "--max_queued_jobs must be at least 1 and --max_queued_bytes not negative");
  }
  if (absl::GetFlag(FLAGS_client_sequence_gap_timeout) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--client_sequence_gap_timeout must be positive");
  }
  if (absl::Status s = ValidateTimers(); !s.ok()) return s;
  absl::StatusOr<KeepaliveSettings> keepalive = KeepaliveFromFlags();
  if (!keepalive.ok()) return keepalive.status();
  config.keepalive = *keepalive;
  return config;
}

// The address others dial: `advertise_host` (WorkerConfig) with the bound port.
std::string AdvertisedAddress(const std::string& bound, const std::string& advertise_host) {
  absl::StatusOr<HostPort> bound_port = ParseHostPort(bound, PortUse::kConnect);
  if (advertise_host.empty() || !bound_port.ok()) return bound;
  return HostPort{advertise_host, bound_port->port}.ToString();
}

// `refusals` as the transport's reporter. REQUIRES: `refusals` outlives its use.
RefusalReporter ReporterOf(metrics::Refusals& refusals) {
  return [&refusals](absl::string_view reason, absl::string_view detail) {
    refusals.Refuse(reason, detail);
  };
}

// Logs why start-up failed; returns the exit code that says so.
int StartFailed(int exit_code, absl::string_view why) {
  spdlog::error("{}", why);
  return exit_code;
}

// /readyz: ready when in a formed ring.
absl::Status RingReadiness(const RingManager& ring) {
  const RingStatus status = ring.Status();
  if (status.ready) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("generation ", status.generation, ": ", status.detail));
}

void ReportHeartbeat(const RingManager& ring, const CollectiveExecutor& executor,
                     v1::HeartbeatRequest* report) {
  const RingStatus status = ring.Status();
  const ExecutorCounters counters = executor.counters();
  report->set_generation(status.generation);
  report->set_ready(status.ready);
  report->set_collectives_completed(counters.completed);
  report->set_collectives_failed(counters.failed);
  report->set_last_error(counters.last_error);
}

// The parts of the worker that WorkerServing serves and stops; RunWorker builds and owns them.
struct WorkerParts {
  const WorkerConfig& config;
  PeerService& peer_service;
  WorkerService& worker_service;
  RingManager& ring;
  CollectiveExecutor& executor;
  LocalPeers& local_peers;
  std::function<std::string()> metrics_page;
  metrics::Refusals& refusals;
};

// The flags every worker of a ring must set alike, as the worker states them when it
// joins: the coordinator refuses a worker that sets one otherwise than a live worker.
std::vector<RingSetting> RingSettingsFromFlags() {
  return {{"--segment_bytes", absl::StrCat(absl::GetFlag(FLAGS_segment_bytes))},
          {"--algorithm", absl::GetFlag(FLAGS_algorithm)},
          {"--doubling_max_bytes", absl::StrCat(absl::GetFlag(FLAGS_doubling_max_bytes))},
          {"--direct_max_ranks", absl::StrCat(absl::GetFlag(FLAGS_direct_max_ranks))},
          {"--relay_max_bytes", absl::StrCat(absl::GetFlag(FLAGS_relay_max_bytes))}};
}

// What the worker serves: the peer server (the ring's data path), the client server (the
// training process's unix socket, an optional TCP port, health), the HTTP endpoint and
// the coordinator session. Start brings them up in that order; Stop takes down whatever
// Start brought up, in the one order that keeps every callback's target alive — after a
// stop signal and after a failed start alike.
class WorkerServing {
 public:
  explicit WorkerServing(WorkerParts parts) : parts_(std::move(parts)) {}

  // kServing once everything is up and the port file is written; otherwise the exit
  // code, with the reason logged.
  int Start();
  void Stop();

 private:
  int StartPeerServer();
  int StartClientServer();
  int StartHttpEndpoint();
  int JoinCoordinator();
  void LogServing() const;

  WorkerParts parts_;
  std::string advertised_;  // the peer address other workers dial
  std::unique_ptr<grpc::Server> peer_server_;
  std::unique_ptr<UnixSocketListener> socket_;
  std::unique_ptr<DescriptorInbox> descriptors_;  // removes its socket file when destroyed
  std::unique_ptr<grpc::Server> client_server_;
  std::unique_ptr<HttpEndpoint> http_;
  std::unique_ptr<CoordinatorSession> session_;
};

int WorkerServing::Start() {
  if (const int failed = StartPeerServer(); failed != kServing) return failed;
  if (const int failed = StartClientServer(); failed != kServing) return failed;
  if (const int failed = StartHttpEndpoint(); failed != kServing) return failed;
  if (const int failed = JoinCoordinator(); failed != kServing) return failed;
  LogServing();
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, advertised_); !s.ok()) {
      return StartFailed(kFailed, s.message());
    }
  }
  return kServing;
}

int WorkerServing::StartPeerServer() {
  absl::StatusOr<std::string> target =
      NormalizeTarget(absl::GetFlag(FLAGS_peer_listen), PortUse::kListen);
  if (!target.ok()) {
    return StartFailed(kBadFlags, absl::StrCat("--peer_listen: ", target.status().message()));
  }
  grpc::ServerBuilder builder;
  // A frame is one segment and its header: nothing larger is read from a peer.
  ConfigureServerBuilder(builder,
                         static_cast<int>(absl::GetFlag(FLAGS_segment_bytes)) +
                             kPeerMessageOverheadBytes,
                         parts_.config.keepalive);
  ListeningPort port;
  port.Add(builder, *target, parts_.config.security.transport.ServerCredentials(ReporterOf(parts_.refusals)));
  builder.RegisterService(&parts_.peer_service);
  peer_server_ = builder.BuildAndStart();
  absl::StatusOr<std::string> bound = port.BoundAddress();
  if (peer_server_ == nullptr || !bound.ok()) {
    return StartFailed(kFailed,
                       absl::StrCat("cannot serve peers on ", absl::GetFlag(FLAGS_peer_listen)));
  }
  advertised_ = AdvertisedAddress(*bound, parts_.config.advertise_host);
  return kServing;
}

int WorkerServing::StartClientServer() {
  grpc::EnableDefaultHealthCheckService(true);
  const std::string& path = parts_.config.socket_path;
  if (absl::Status s = PrepareSocketPath(path, parts_.config.default_socket); !s.ok()) {
    return StartFailed(kFailed, s.message());
  }
  // The worker accepts on its socket itself, to learn each peer (local_peers.h).
  absl::StatusOr<std::unique_ptr<UnixSocketListener>> socket = UnixSocketListener::Listen(path);
  if (!socket.ok()) return StartFailed(kFailed, socket.status().message());
  socket_ = *std::move(socket);
  // Beside it, where a client in another pid namespace hands over its buffers'
  // descriptors; without it (a path too long) those clients stage in files.
  const std::string descriptor_path = DescriptorSocketPath(path);
  absl::StatusOr<std::unique_ptr<DescriptorInbox>> inbox =
      PrepareSocketPath(descriptor_path, parts_.config.default_socket).ok()
          ? DescriptorInbox::Listen(descriptor_path, DescriptorInboxLimits{},
                                    ReporterOf(parts_.refusals))
          : absl::FailedPreconditionError(absl::StrCat("cannot use ", descriptor_path));
  if (inbox.ok()) {
    descriptors_ = *std::move(inbox);
    parts_.worker_service.UseDescriptorInbox(descriptors_.get());
  } else {
    spdlog::warn("no descriptor socket ({}): a training process in another pid namespace "
                 "stages its tensors in shared-memory files",
                 inbox.status().message());
  }
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder,
                         static_cast<int>(absl::GetFlag(FLAGS_max_inline_bytes)) +
                             kRequestOverheadBytes,
                         parts_.config.keepalive);
  ListeningPort tcp_port;
  const std::string client_listen = absl::GetFlag(FLAGS_client_listen);
  if (!client_listen.empty()) {
    tcp_port.Add(builder, client_listen,
                 parts_.config.security.transport.ServerCredentials(ReporterOf(parts_.refusals)));
  }
  builder.RegisterService(&parts_.worker_service);
  client_server_ = builder.BuildAndStart();
  if (client_server_ == nullptr) {
    return StartFailed(kFailed, absl::StrCat("cannot serve clients on ", path,
                                             client_listen.empty() ? "" : " and ", client_listen));
  }
  socket_->Serve(*client_server_, parts_.local_peers);
  return kServing;
}

int WorkerServing::StartHttpEndpoint() {
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http = StartHttpEndpointFromFlags(
      parts_.metrics_page, [&ring = parts_.ring] { return RingReadiness(ring); },
      &parts_.refusals, parts_.config.security.http_token);
  if (!http.ok()) {
    return StartFailed(http.status().code() == absl::StatusCode::kInvalidArgument ? kBadFlags
                                                                                  : kFailed,
                       http.status().message());
  }
  http_ = std::move(*http);
  return kServing;
}

int WorkerServing::JoinCoordinator() {
  RingManager& ring = parts_.ring;
  const CollectiveExecutor& executor = parts_.executor;
  const std::string http_address =
      http_ == nullptr ? ""
                       : AdvertisedAddress(http_->address(), parts_.config.advertise_host);
  const CoordinatorSessionOptions options{
      .coordinator_target = parts_.config.coordinator,
      .worker_id = parts_.config.worker_id,
      .peer_address = advertised_,
      .http_address = http_address,
      .join_timeout = absl::GetFlag(FLAGS_join_timeout),
      .known_generation = [&ring] { return ring.Status().generation; },
      .security = parts_.config.security.transport,
      .keepalive = parts_.config.keepalive,
      .on_lease_renewed = [&ring](absl::Time until) { ring.RenewLease(until); },
      .check_lease = [&ring] { ring.CheckLease(); },
      .incarnation = 0,
      .ring_settings = RingSettingsFromFlags(),
  };
  session_ = std::make_unique<CoordinatorSession>(
      options, [&ring](const v1::RingView& view) { ring.OnView(view); },
      [&ring, &executor](v1::HeartbeatRequest* report) { ReportHeartbeat(ring, executor, report); },
      [&ring](absl::string_view why) { ring.Suspend(why); });
  if (absl::Status s = session_->Start(); !s.ok()) return StartFailed(kFailed, s.message());
  return kServing;
}

void WorkerServing::LogServing() const {
  const std::string client_listen = absl::GetFlag(FLAGS_client_listen);
  const DataListener* data = parts_.peer_service.data_listener();
  spdlog::info("worker {} serving training process on unix:{}{}; ring peers on {} ({}){}{}",
               parts_.config.worker_id, parts_.config.socket_path,
               client_listen.empty() ? "" : absl::StrCat(" and ", client_listen), advertised_,
               parts_.config.security.transport.Describe(),
               data == nullptr ? "" : absl::StrCat(", their data connections on port ", data->port()),
               http_ == nullptr ? ""
                                : absl::StrCat("; metrics on http://", http_->address(), "/metrics"));
}

void WorkerServing::Stop() {
  if (http_ != nullptr) http_->Stop();  // its callbacks read the ring
  parts_.worker_service.Stop();
  if (session_ != nullptr) session_->Stop();
  parts_.ring.Shutdown();
  if (socket_ != nullptr) socket_->Stop();  // before the server it hands connections to
  if (client_server_ != nullptr) {
    client_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  }
  descriptors_.reset();  // no RegisterBuffer runs any more; removes its socket file
  if (peer_server_ != nullptr) {
    peer_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  // The socket file is this worker's only once it listened on it.
  if (socket_ != nullptr) ::unlink(parts_.config.socket_path.c_str());
}

WorkerServiceOptions ServiceOptions(const WorkerConfig& config, const Reducer& reducer) {
  WorkerServiceOptions options;
  options.worker_id = config.worker_id;
  options.reduce_device = reducer.name();
  options.shm_dir = absl::GetFlag(FLAGS_shm_dir);
  options.default_timeout = absl::GetFlag(FLAGS_collective_timeout);
  options.max_inline_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_inline_bytes));
  options.registered_buffers.max_buffers =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_registered_buffers));
  options.registered_buffers.max_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_max_registered_buffer_bytes));
  options.shm_spin = absl::GetFlag(FLAGS_shm_spin);
  return options;
}

// Removes the shared tensors of training processes that died with an earlier worker
// (killed together, nobody removed them).
void SweepSharedMemory() {
  if (!absl::GetFlag(FLAGS_shm_sweep)) return;
  const std::string dir = absl::GetFlag(FLAGS_shm_dir);
  const std::vector<std::string> removed = SweepDeadClientFiles(dir, ::geteuid());
  if (!removed.empty()) {
    spdlog::info("removed {} shared tensor file(s) of training processes that died in {} "
                 "(e.g. {})", removed.size(), dir, removed.front());
  }
}

// The port for the data connections of the ring streams this worker accepts, on the
// host of --peer_listen; null when frames stay on the streams (--peer_transport=grpc).
absl::StatusOr<std::shared_ptr<DataListener>> ListenForDataConnections(
    const RefusalReporter& refusals) {
  const std::string transport = absl::GetFlag(FLAGS_peer_transport);
  if (transport == "grpc") return nullptr;
  absl::StatusOr<HostPort> listen =
      ParseHostPort(absl::GetFlag(FLAGS_peer_listen), PortUse::kListen);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--peer_listen: ", listen.status().message()));
  }
  DataListenerOptions options;
  options.host = listen->host;
  options.port = absl::GetFlag(FLAGS_peer_data_port);
  options.refusals = refusals;
  absl::StatusOr<std::unique_ptr<DataListener>> listener = DataListener::Listen(std::move(options));
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat("--peer_data_port: ", listener.status().message()));
  }
  return std::shared_ptr<DataListener>(*std::move(listener));
}

// Wires the worker's parts together, serves until SIGINT or SIGTERM, then stops.
int RunWorker(const WorkerConfig& config, Reducer& reducer) {
  SweepSharedMemory();
  // Before any thread starts, so that every thread inherits the blocked stop signals.
  const StopSignals stop_signals;
  prometheus::Registry metrics;
  metrics::Refusals refusals(metrics);  // ringsync_refused_total: every refused caller
  const RefusalReporter report_refusal = ReporterOf(refusals);
  InboxRegistry registry(/*inbox_capacity=*/4, report_refusal, absl::GetFlag(FLAGS_shm_spin));
  const bool same_host_path = absl::GetFlag(FLAGS_peer_transport) == "auto";
  absl::StatusOr<std::shared_ptr<DataListener>> data_listener =
      ListenForDataConnections(report_refusal);
  if (!data_listener.ok()) {
    spdlog::error("{}", data_listener.status().message());
    return absl::IsInvalidArgument(data_listener.status()) ? kBadFlags : kFailed;
  }
  PeerService peer_service(
      registry, HelloPolicy{.require_certificates = config.security.transport.tls(),
                            .refusals = report_refusal,
                            .accept_shm = same_host_path,
                            .data_listener = *data_listener,
                            .seal_data_connections = config.security.transport.tls(),
                            .max_data_record_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_segment_bytes)) +
                                                     kPeerMessageOverheadBytes});
  GrpcLinkFactory links(config.worker_id, registry, config.security.transport, config.keepalive,
                        absl::GetFlag(FLAGS_ring_open_attempt));
  links.set_same_host_path(SameHostPath{
      same_host_path, static_cast<uint32_t>(absl::GetFlag(FLAGS_peer_shm_slots)),
      std::max<uint64_t>(static_cast<uint64_t>(absl::GetFlag(FLAGS_segment_bytes)), 4096),
      static_cast<uint64_t>(absl::GetFlag(FLAGS_peer_shm_mailbox_bytes))});
  links.set_data_connections(*data_listener != nullptr);
  const ExecutorOptions executor_options{
      .segment_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_segment_bytes)),
      .reattach_grace = absl::GetFlag(FLAGS_client_reattach_grace),
      .max_queued_jobs = static_cast<size_t>(absl::GetFlag(FLAGS_max_queued_jobs)),
      .max_queued_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_queued_bytes)),
      .sequence_gap_timeout = absl::GetFlag(FLAGS_client_sequence_gap_timeout),
      .abort_notice_timeout = absl::GetFlag(FLAGS_abort_notice_timeout),
      .algorithm = {.mode = *ParseAlgorithmMode(absl::GetFlag(FLAGS_algorithm)),
                    .relay_max_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_relay_max_bytes)),
                    .relay_frame_limit_bytes =
                        static_cast<uint64_t>(absl::GetFlag(FLAGS_segment_bytes)),
                    .stride_links = true,
                    .stride_frame_bytes =
                        static_cast<uint64_t>(absl::GetFlag(FLAGS_doubling_max_bytes)),
                    .direct_max_ranks = absl::GetFlag(FLAGS_direct_max_ranks)}};
  RingManager ring(config.worker_id, links, absl::GetFlag(FLAGS_connect_timeout),
                   ConnectRetry{absl::GetFlag(FLAGS_connect_retry_initial),
                                absl::GetFlag(FLAGS_connect_retry_max)},
                   [policy = executor_options.algorithm](int world_size) {
                     return StridesToConnectAhead(world_size, policy);
                   });
  metrics::AddBuildInfo(metrics);
  const metrics::ProcessCollector process_metrics;
  WorkerMetrics worker_metrics(metrics, ring, reducer.name());
  CollectiveExecutor executor(config.worker_id, ring, reducer, executor_options, &worker_metrics);
  LocalPeers local_peers;
  WorkerService worker_service(ServiceOptions(config, reducer), ring, executor, &local_peers,
                               &refusals);
  const RegisteredMemoryMetrics registered_memory_metrics(worker_service.registered_buffers());

  WorkerServing serving({config, peer_service, worker_service, ring, executor, local_peers, [&] {
                           return metrics::TextPage({&metrics, &process_metrics, &worker_metrics,
                                                     &registered_memory_metrics});
                         },
                         refusals});
  if (const int failed = serving.Start(); failed != kServing) {
    serving.Stop();
    return failed;
  }
  const int signal_number = stop_signals.Await();
  spdlog::info("worker {}: signal {} received, shutting down", config.worker_id, signal_number);
  serving.Stop();
  return kServing;
}

}  // namespace

int RunWorkerMain() {
  // Before any thread allocates: see heap_retention.h.
  const bool heap_kept = KeepFreedHeapMemory();
  InitLogging("worker");
  if (!heap_kept) spdlog::info("the allocator does not take mallopt: freed heap memory may go back to the kernel");
  absl::StatusOr<WorkerConfig> config = ReadConfig();
  if (!config.ok()) {
    spdlog::error("{}; see 'ringsyncd --help'", config.status().message());
    return kBadFlags;
  }
  // Fail now, not at the first collective, when the reduction device is unusable.
  absl::StatusOr<ReducerChoice> choice = ChooseReducer(absl::GetFlag(FLAGS_reduce_device));
  if (!choice.ok()) {
    spdlog::error("--reduce_device={}: {}", absl::GetFlag(FLAGS_reduce_device),
                  choice.status().message());
    return kBadFlags;
  }
  std::unique_ptr<Reducer> reducer = std::move(choice->reducer);
  SetLogWorkerId(config->worker_id);
  spdlog::info("worker {}: reducing on {} ({})", config->worker_id, reducer->name(), choice->reason);
  return RunWorker(*config, *reducer);
}

}  // namespace ringsync
