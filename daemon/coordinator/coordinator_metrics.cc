#include "daemon/coordinator/coordinator_metrics.h"

#include <utility>

#include "daemon/metrics/scrape_family.h"

namespace ringsync {

std::vector<prometheus::MetricFamily> CoordinatorCollector::Collect() const {
  using metrics::SingleSample;
  using prometheus::MetricType;
  v1::ClusterStatus status;
  server_.ClusterStatus(&status);
  std::vector<prometheus::MetricFamily> out = {
      SingleSample("ringsync_coordinator_workers_joined",
                   "Workers with a live session (joined, heartbeating).", MetricType::Gauge,
                   status.workers_size()),
      SingleSample("ringsync_coordinator_world_size",
                   "The most workers the ring may have (--max_world_size or --world_size).",
                   MetricType::Gauge, status.max_world_size()),
      SingleSample("ringsync_coordinator_min_world_size",
                   "The fewest workers the ring forms or stays formed with (--min_world_size).",
                   MetricType::Gauge, status.min_world_size()),
      SingleSample("ringsync_coordinator_ring_size",
                   "Members of the current ring view (0 while it is not formed).",
                   MetricType::Gauge, status.view().members_size()),
      SingleSample("ringsync_membership_changes_total",
                   "Ring views published with a new generation: formations, re-forms after an "
                   "eviction, admissions, dissolutions.",
                   MetricType::Counter, static_cast<double>(status.membership_changes_total())),
      SingleSample("ringsync_coordinator_views_adopted_total",
                   "Rings a restarted coordinator adopted unchanged from its rejoining workers.",
                   MetricType::Counter, static_cast<double>(status.views_adopted_total())),
      SingleSample("ringsync_coordinator_joins_total",
                   "Successful joins since the coordinator started (a rejoin counts again).",
                   MetricType::Counter, static_cast<double>(status.joins_total())),
      SingleSample("ringsync_coordinator_generations_published_total",
                   "Ring views published since the coordinator started (formed and dissolved).",
                   MetricType::Counter, static_cast<double>(status.generations_published())),
      SingleSample("ringsync_coordinator_generation", "The generation of the current ring view.",
                   MetricType::Gauge, static_cast<double>(status.view().generation())),
      SingleSample("ringsync_coordinator_ring_formed",
                   "1 when the current ring view is formed (every rank assigned), else 0.",
                   MetricType::Gauge, status.view().members_size() > 0 ? 1 : 0),
  };
  // Kept (HELP and TYPE) while no worker is live, so the page documents it.
  prometheus::MetricFamily ages{"ringsync_coordinator_heartbeat_age_seconds",
                                "Seconds since each live worker's last heartbeat (or its join).",
                                MetricType::Gauge,
                                {}};
  // Every reason is listed, 0 included, so the page documents them.
  prometheus::MetricFamily evictions{
      "ringsync_evictions_total",
      "Worker sessions ended, by reason: heartbeat_timeout (lease expired), watch_closed, "
      "left, restarted (replaced by a new incarnation).",
      MetricType::Counter,
      {}};
  for (const char* reason : {"heartbeat_timeout", "watch_closed", "left", "restarted"}) {
    const auto it = status.evictions_total().find(reason);
    const double count = it == status.evictions_total().end() ? 0 : static_cast<double>(it->second);
    evictions.metric.push_back(metrics::Sample(MetricType::Counter, count, {{"reason", reason}}));
  }
  out.push_back(std::move(evictions));
  for (const v1::WorkerStatus& worker : status.workers()) {
    ages.metric.push_back(
        metrics::Sample(MetricType::Gauge,
                        static_cast<double>(worker.last_heartbeat_age_ms()) / 1000.0,
                        {{"worker_id", worker.worker_id()}}));
  }
  out.push_back(std::move(ages));
  return out;
}

}  // namespace ringsync
