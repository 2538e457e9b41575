// The coordinator's /metrics: membership as GetClusterStatus reports it, read at scrape
// time (names and meaning in the README's "Metrics" section).
//
// Thread-safety: Collect() may run on several threads at once.
#pragma once

#include <vector>

#include "daemon/coordinator/coordinator_server.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringsync {

// ringsync_coordinator_workers_joined, _world_size, _min_world_size, _ring_size,
// _joins_total, _generations_published_total, _generation, _ring_formed,
// _views_adopted_total and _heartbeat_age_seconds{worker_id}; and
// ringsync_membership_changes_total and ringsync_evictions_total{reason}.
class CoordinatorCollector final : public prometheus::Collectable {
 public:
  // REQUIRES: `server` outlives every scrape.
  explicit CoordinatorCollector(CoordinatorServer& server) : server_(server) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  CoordinatorServer& server_;
};

}  // namespace ringsync
