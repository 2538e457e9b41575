// The coordinator's /metrics: membership as GetClusterStatus reports it, read at scrape
// time (names and meaning in the README's "Metrics" section).
#pragma once

#include "daemon/coordinator/coordinator_server.h"
#include "daemon/metrics/registry.h"

namespace ringsync {

// Adds ringsync_coordinator_workers_joined, _joins_total, _generations_published_total,
// _heartbeat_age_seconds{worker_id}, _ring_formed, _world_size and _generation.
// REQUIRES: `server` outlives every scrape of `registry`.
void AddCoordinatorCollector(metrics::Registry& registry, CoordinatorServer& server);

}  // namespace ringsync
