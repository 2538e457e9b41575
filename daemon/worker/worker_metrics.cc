#include "daemon/worker/worker_metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/outcome.h"
#include "daemon/metrics/scrape_family.h"

namespace ringsync {
namespace {

using metrics::SingleSample;
using prometheus::MetricType;

// From 100 µs (a tiny all-reduce on loopback) to a minute (the default deadline).
const prometheus::Histogram::BucketBoundaries kDurationBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

// peer_rank="2", peer_worker_id="w2" for the neighbour at `rank`.
prometheus::Labels PeerLabels(const RingEpoch& epoch, int rank) {
  const std::string id =
      rank >= 0 && rank < static_cast<int>(epoch.worker_ids.size()) ? epoch.worker_ids[rank] : "";
  return {{"peer_rank", absl::StrCat(rank)}, {"peer_worker_id", id}};
}

prometheus::Family<prometheus::Counter>& AddCounter(prometheus::Registry& registry,
                                                    const std::string& name,
                                                    const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& AddGauge(prometheus::Registry& registry,
                                                const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

}  // namespace

absl::string_view SizeClass(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;
  if (bytes < 64 * kKiB) return "<64KiB";
  if (bytes < kMiB) return "<1MiB";
  if (bytes < 16 * kMiB) return "<16MiB";
  if (bytes < 256 * kMiB) return "<256MiB";
  return ">=256MiB";
}

double AllReduceBusBandwidth(uint64_t bytes, int world_size, absl::Duration elapsed) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (seconds <= 0 || world_size < 1) return 0;
  const double n = static_cast<double>(world_size);
  return static_cast<double>(bytes) / seconds * 2 * (n - 1) / n;
}

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry, RingManager& ring,
                             absl::string_view reduce_device)
    : ring_(ring),
      collectives_(AddCounter(registry, "ringsync_collectives_total",
                              "Collectives this worker's training process asked for that "
                              "finished, by kind, dtype and result (ok or failed).")),
      failed_(AddCounter(registry, "ringsync_collectives_failed_total",
                         "Failed collectives by kind and cause: mismatch, timeout, peer_lost, "
                         "client_gone, generation_changed, membership_changed, invalid, other.")),
      in_doubt_(AddCounter(registry, "ringsync_collectives_in_doubt_total",
                           "Failed collectives marked in doubt, by kind: this rank completed "
                           "its part but did not hear that every rank did, so another rank "
                           "may have returned OK (the training loop must resynchronise).")),
      algorithms_(AddCounter(registry, "ringsync_allreduce_algorithm_total",
                             "All-reduces (and barriers) this worker ran, by the algorithm "
                             "they ran: ring, or relay, doubling or direct (the small-message "
                             "algorithms).")),
      collective_algorithms_(AddCounter(
          registry, "ringsync_collective_algorithm_total",
          "Collectives this worker ran, by kind and the algorithm they ran: an all-reduce's "
          "as ringsync_allreduce_algorithm_total; direct or doubling over the stride links "
          "(the small broadcasts, scatters, gathers, all-gathers and reduce-scatters); else "
          "chain (broadcast, scatter, gather) or ring (all-gather, reduce-scatter).")),
      data_paths_(AddCounter(registry, "ringsync_collective_data_total",
                             "Collectives by how their tensor reached this worker: registered "
                             "(memory the training process registered: Client::Allocate "
                             "buffers, the SDK's staging), file (a shared-memory file), inline "
                             "(in the request), none (no data).")),
      bytes_sent_(AddCounter(registry, "ringsync_ring_bytes_sent_total",
                             "Payload bytes this worker sent on the ring to its right neighbour "
                             "(rank and worker id); the stride algorithms' bytes to its other "
                             "stride links are counted here too.")),
      bytes_received_(AddCounter(registry, "ringsync_ring_bytes_received_total",
                                 "Payload bytes this worker received on the ring from its left "
                                 "neighbour (rank and worker id); the stride algorithms' bytes "
                                 "from their other links are counted here too.")),
      duration_(prometheus::BuildHistogram()
                    .Name("ringsync_collective_duration_seconds")
                    .Help("Wall time of successful collectives, from the executor taking them to "
                          "their result.")
                    .Register(registry)),
      busbw_(AddGauge(registry, "ringsync_busbw_bytes_per_second",
                      "Bus bandwidth of the last successful all-reduce in each size class: "
                      "S / t x 2(N-1)/N (nccl-tests' busbw).")),
      reduce_seconds_(AddCounter(registry, "ringsync_reduce_seconds_total",
                                 "Time spent combining received segments into the tensor.")
                          .Add({})),
      input_wait_seconds_(
          AddCounter(registry, "ringsync_input_wait_seconds_total",
                     "Time collectives stood waiting for their training process to copy its "
                     "input in (a plain span's all-reduce, which starts while the copy runs).")
              .Add({})),
      overflows_(AddCounter(registry, "ringsync_overflows_total",
                            "Reductions of finite values that overflowed to +-Inf.")
                     .Add({})) {
  AddGauge(registry, "ringsync_reduce_device_info",
           "Always 1; the label names the device this worker reduces on (cpu, cuda:N).")
      .Add({{"device", std::string(reduce_device)}})
      .Set(1);
  // Series that exist from the start, so that rate() and absent() work before the first
  // collective.
  collectives_.Add({{"kind", "allreduce"}, {"dtype", "float32"}, {"result", "ok"}});
}

std::vector<prometheus::MetricFamily> WorkerMetrics::Collect() const {
  const RingStatus status = ring_.Status();
  double in_flight = 0;
  double stride_links_open = 0;
  std::string transport;
  if (std::shared_ptr<RingEpoch> epoch = ring_.Ready(); epoch != nullptr && epoch->link != nullptr) {
    in_flight = static_cast<double>(epoch->link->queued_frames());
    transport = std::string(epoch->link->transport());
    stride_links_open = epoch->stride_links_open.load();
  }
  // Which transport the edge to the right neighbour uses: 1 on its series, 0 on the other.
  prometheus::MetricFamily peer_transport{
      "ringsync_peer_transport",
      "How segment payload travels on the edge to the right neighbour (edge=\"next\"): 1 on "
      "the transport in use (shm: the same-host slot ring; tcp: a data connection beside the "
      "gRPC stream; grpc: gRPC bytes), else 0.",
      MetricType::Gauge,
      {}};
  for (const char* name : {"shm", "tcp", "grpc"}) {
    prometheus::ClientMetric sample;
    sample.label = {{"edge", "next"}, {"transport", name}};
    sample.gauge.value = transport == name ? 1 : 0;
    peer_transport.metric.push_back(sample);
  }
  return {
      peer_transport,
      SingleSample("ringsync_ring_generation",
                   "The ring view (generation) this worker last received.", MetricType::Gauge,
                   static_cast<double>(status.generation)),
      SingleSample("ringsync_ring_rank",
                   "This worker's rank in the current generation; -1 when not in a ring.",
                   MetricType::Gauge, status.rank),
      SingleSample("ringsync_ring_world_size",
                   "Ranks in the current generation; 0 when not in a ring.", MetricType::Gauge,
                   status.world_size),
      SingleSample("ringsync_ring_ready",
                   "1 when this worker is connected in a formed ring of the current generation "
                   "(what /readyz reports), else 0.",
                   MetricType::Gauge, status.ready ? 1 : 0),
      SingleSample("ringsync_stride_links_open",
                   "Links to ranks beyond the neighbours (rank+2, +4, ... for the doubling "
                   "all-reduce, every rank for the direct exchange) open in the current "
                   "generation; those the small all-reduces use are connected once the ring "
                   "forms, any other on first use.",
                   MetricType::Gauge, stride_links_open),
      SingleSample("ringsync_stride_links_connected_total",
                   "Links to ranks beyond the neighbours this worker has connected, over "
                   "every generation.",
                   MetricType::Counter, static_cast<double>(ring_.stride_links_connected())),
      SingleSample("ringsync_segments_in_flight",
                   "Ring segments received from the left neighbour and not yet consumed (the "
                   "inbox depth; bounded by the inbox capacity).",
                   MetricType::Gauge, in_flight),
  };
}

void WorkerMetrics::OnCollectiveFinished(const FinishedCollective& c) {
  const std::string kind(CollectiveKindName(c.kind));
  const bool ok = c.status.ok();
  collectives_
      .Add({{"kind", kind}, {"dtype", std::string(DTypeName(c.dtype))},
            {"result", ok ? "ok" : "failed"}})
      .Increment();
  if (!c.algorithm.empty()) {
    if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kBarrier) {
      algorithms_.Add({{"algorithm", std::string(c.algorithm)}}).Increment();
    }
    collective_algorithms_.Add({{"kind", kind}, {"algorithm", std::string(c.algorithm)}})
        .Increment();
  }
  data_paths_.Add({{"path", std::string(c.data_path)}}).Increment();
  if (!ok) failed_.Add({{"kind", kind}, {"cause", std::string(FailureCauseName(c.cause))}}).Increment();
  if (!ok && OutcomeMarkOf(c.status) == OutcomeMark::kInDoubt) in_doubt_.Add({{"kind", kind}}).Increment();
  if (c.epoch != nullptr) {
    bytes_sent_.Add(PeerLabels(*c.epoch, c.epoch->me.next()))
        .Increment(static_cast<double>(c.stats.bytes_sent));
    bytes_received_.Add(PeerLabels(*c.epoch, c.epoch->me.prev()))
        .Increment(static_cast<double>(c.stats.bytes_received));
  }
  reduce_seconds_.Increment(absl::ToDoubleSeconds(c.stats.reduce_time));
  input_wait_seconds_.Increment(absl::ToDoubleSeconds(c.stats.input_wait));
  overflows_.Increment(static_cast<double>(c.stats.overflows));
  if (!ok) return;
  duration_.Add({{"kind", kind}}, kDurationBounds).Observe(absl::ToDoubleSeconds(c.elapsed));
  if (c.kind == CollectiveKind::kAllReduce && c.epoch != nullptr) {
    busbw_.Add({{"size_class", std::string(SizeClass(c.bytes))}})
        .Set(AllReduceBusBandwidth(c.bytes, c.epoch->me.world_size, c.elapsed));
  }
}

std::vector<prometheus::MetricFamily> RegisteredMemoryMetrics::Collect() const {
  return {
      SingleSample("ringsync_registered_buffers",
                   "Buffers the attached training process has registered with this worker now "
                   "(its Client::Allocate buffers, the SDK's staging buffers, staging arena and "
                   "call channel); bounded by --max_registered_buffers.",
                   MetricType::Gauge, static_cast<double>(buffers_.size())),
      SingleSample("ringsync_registered_bytes",
                   "Bytes of those buffers: shared memory the worker maps too (the SDK keeps as "
                   "much staging memory as it had in use at once; Client::ReleaseIdleMemory "
                   "hands the idle part back).",
                   MetricType::Gauge, static_cast<double>(buffers_.bytes())),
  };
}

}  // namespace ringsync
