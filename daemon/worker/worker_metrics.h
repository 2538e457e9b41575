// WorkerMetrics: what a worker exports on /metrics (names, labels and meaning are listed
// in the README's "Metrics" section). The executor reports each finished collective to
// prometheus-cpp families in the daemon's registry (a few label lookups and atomic adds —
// never per segment); the ring's state (generation, rank, readiness, inbox depth) is read
// at scrape time, by this object as a prometheus::Collectable served beside the registry.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ringsync/dtype.h"
#include "core/collective.h"
#include "core/ring/ring_member.h"
#include "daemon/worker/failure_cause.h"
#include "daemon/worker/registered_buffers.h"
#include "daemon/worker/ring_manager.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace ringsync {

// One collective as the executor finished it.
struct FinishedCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DType dtype = DType::kFloat32;
  uint64_t bytes = 0;                // this rank's buffer: count x element size
  const RingEpoch* epoch = nullptr;  // the generation it ran on; null when there was none
  RingStats stats;                   // what moved on the ring, also when it failed
  absl::Duration elapsed;
  absl::Status status;
  FailureCause cause = FailureCause::kOther;  // meaningful when !status.ok()
  // What it ran (CollectiveExecutor::AlgorithmNameOf); empty when it found no ring.
  absl::string_view algorithm;
  absl::string_view data_path = "none";  // CollectiveJob::data_path
};

// The size classes of ringsync_busbw_bytes_per_second: "<64KiB", "<1MiB", "<16MiB",
// "<256MiB", ">=256MiB".
absl::string_view SizeClass(uint64_t bytes);

// nccl-tests' bus bandwidth of an all-reduce of `bytes` over `world_size` ranks that
// took `elapsed`: bytes / elapsed x 2(N-1)/N. 0 when elapsed is not positive.
double AllReduceBusBandwidth(uint64_t bytes, int world_size, absl::Duration elapsed);

class WorkerMetrics final : public prometheus::Collectable {
 public:
  // Registers the worker's families in `registry`.
  // REQUIRES: `registry` and `ring` outlive this object.
  WorkerMetrics(prometheus::Registry& registry, RingManager& ring,
                absl::string_view reduce_device);

  void OnCollectiveFinished(const FinishedCollective& collective);

  // The ring's state now: ringsync_ring_generation, _rank, _world_size, _ready and
  // ringsync_segments_in_flight.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  RingManager& ring_;
  prometheus::Family<prometheus::Counter>& collectives_;
  prometheus::Family<prometheus::Counter>& failed_;
  prometheus::Family<prometheus::Counter>& in_doubt_;
  prometheus::Family<prometheus::Counter>& algorithms_;
  prometheus::Family<prometheus::Counter>& collective_algorithms_;
  prometheus::Family<prometheus::Counter>& data_paths_;
  prometheus::Family<prometheus::Counter>& bytes_sent_;
  prometheus::Family<prometheus::Counter>& bytes_received_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Counter& reduce_seconds_;
  prometheus::Counter& input_wait_seconds_;
  prometheus::Counter& overflows_;
};

// The attached training process's registered memory now, read at scrape time:
// ringsync_registered_buffers and ringsync_registered_bytes.
// REQUIRES: `buffers` outlives this object.
class RegisteredMemoryMetrics final : public prometheus::Collectable {
 public:
  explicit RegisteredMemoryMetrics(const RegisteredBuffers& buffers) : buffers_(buffers) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const RegisteredBuffers& buffers_;
};

}  // namespace ringsync
