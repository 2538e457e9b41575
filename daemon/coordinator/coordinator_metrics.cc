#include "daemon/coordinator/coordinator_metrics.h"

#include <string>
#include <utility>
#include <vector>

namespace ringsync {
namespace {

using metrics::FamilySnapshot;
using metrics::MetricType;
using metrics::Sample;
using metrics::SingleSample;

}  // namespace

void AddCoordinatorCollector(metrics::Registry& registry, CoordinatorServer& server) {
  registry.AddCollector([&server](std::vector<FamilySnapshot>* out) {
    v1::ClusterStatus status;
    server.ClusterStatus(&status);
    out->push_back(SingleSample("ringsync_coordinator_workers_joined",
                                "Workers with a live session (joined, heartbeating).",
                                MetricType::kGauge, status.workers_size()));
    out->push_back(SingleSample("ringsync_coordinator_world_size",
                                "Workers the ring needs (--world_size).", MetricType::kGauge,
                                status.world_size()));
    out->push_back(
        SingleSample("ringsync_coordinator_joins_total",
                     "Successful joins since the coordinator started (a rejoin counts again).",
                     MetricType::kCounter, static_cast<double>(status.joins_total())));
    out->push_back(
        SingleSample("ringsync_coordinator_generations_published_total",
                     "Ring views published since the coordinator started (formed and dissolved).",
                     MetricType::kCounter, static_cast<double>(status.generations_published())));
    out->push_back(SingleSample("ringsync_coordinator_generation",
                                "The generation of the current ring view.", MetricType::kGauge,
                                static_cast<double>(status.view().generation())));
    out->push_back(
        SingleSample("ringsync_coordinator_ring_formed",
                     "1 when the current ring view is formed (every rank assigned), else 0.",
                     MetricType::kGauge, status.view().members_size() > 0 ? 1 : 0));
    FamilySnapshot ages{"ringsync_coordinator_heartbeat_age_seconds",
                        "Seconds since each live worker's last heartbeat (or its join).",
                        MetricType::kGauge,
                        {}};
    for (const v1::WorkerStatus& worker : status.workers()) {
      ages.samples.push_back(Sample{"",
                                    {{"worker_id", worker.worker_id()}},
                                    static_cast<double>(worker.last_heartbeat_age_ms()) / 1000.0});
    }
    out->push_back(std::move(ages));
  });
}

}  // namespace ringsync
