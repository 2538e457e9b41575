// ChaosJob: a training job of real processes for the chaos tests and measures — a
// LocalCluster (coordinator + N workers) with one ringsync-chaos-trainer beside each
// worker — that a scenario hurts (kills, freezes, restarts) while the trainers run, and
// then reads back: the trainers' outcome lines (outcome_log.h) and the daemons' /metrics.
// Everything it starts stops with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "tests/chaos/outcome_log.h"
#include "tests/integration/metric_page.h"
#include "tools/cluster/local_cluster.h"

namespace ringsync::chaos {

struct ChaosJobOptions {
  int world_size = 4;
  // As LocalClusterOptions: an elastic ring between min_world_size and world_size (0: a
  // fixed-size ring); workers started at first (-1: all).
  int min_world_size = 0;
  int started_workers = -1;
  std::string ringsyncd;    // the ringsyncd binary
  std::string trainer;      // the ringsync-chaos-trainer binary
  std::string make_certs;   // deploy/make-certs.sh (mutual TLS, as deployed)
  std::vector<std::string> worker_flags;
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> trainer_flags;  // for every trainer, e.g. "--steps=40"
  // How the daemons authenticate: mutual TLS as deployed (data connections sealed), or
  // the cluster token (data connections in the clear).
  ClusterSecurity security = ClusterSecurity::kMutualTls;
};

class ChaosJob {
 public:
  // Starts the cluster (with HTTP endpoints), not the trainers.
  static absl::StatusOr<std::unique_ptr<ChaosJob>> Start(const ChaosJobOptions& options);

  LocalCluster& cluster() { return *cluster_; }
  int world_size() const { return cluster_->world_size(); }

  // Starts trainer i (slot i) beside worker i, with the common flags and `extra`.
  absl::Status StartTrainer(int i, const std::vector<std::string>& extra = {});
  absl::Status StartTrainers();
  // Waits until trainer i has logged `n` successful steps; false at the timeout.
  bool AwaitOkSteps(int i, int n, absl::Duration timeout);
  // Waits until every trainer has; false at the timeout.
  bool AwaitOkStepsEverywhere(int n, absl::Duration timeout);
  // Waits for every trainer to exit by `deadline`; their exit codes. A trainer still
  // running then is killed and reported as -1 (a hang).
  std::vector<int> AwaitTrainers(const SteadyDeadline& deadline);
  // What the trainers logged so far (read incrementally: cheap to call often).
  std::vector<TrainerLog> Logs();
  const TrainerLog& Log(int i);
  // The last lines of every daemon's and trainer's log, for a failure message.
  std::string Diagnostics() const;
  // The process ids of the trainers (for /dev/shm checks: the SDK's files carry them).
  std::vector<pid_t> TrainerPids() const;

  // The sum of the series of `family` on a daemon's /metrics whose labels contain
  // `labels` (e.g. "cause=\"peer_lost\""); NotFound when it has none (not yet counted, or
  // a metric this build does not have); Unavailable when the page cannot be read.
  absl::StatusOr<double> WorkerMetric(int i, absl::string_view family,
                                      absl::string_view labels = "") const;
  absl::StatusOr<double> CoordinatorMetric(absl::string_view family,
                                           absl::string_view labels = "") const;

 private:
  ChaosJob() = default;
  absl::StatusOr<double> Metric(const std::string& http_address, absl::string_view family,
                                absl::string_view labels) const;

  ChaosJobOptions options_;
  std::unique_ptr<LocalCluster> cluster_;
  struct Trainer {
    int slot = 0;
    ChildProcess* process = nullptr;
    std::string path;      // its log file
    uint64_t offset = 0;   // bytes of it parsed
    TrainerLog log;
  };
  Trainer* FindTrainer(int slot);

  std::vector<std::unique_ptr<Trainer>> trainers_;
};

// The SDK's shared-memory files in /dev/shm of the given processes (named
// ringsync-<pid>-...): none may be left once they exited.
std::vector<std::string> SharedMemoryFilesOf(const std::vector<pid_t>& pids);

// SumMetric (tests/integration/metric_page.h), as the chaos specs call it.
using ::ringsync::testing::SumMetric;

}  // namespace ringsync::chaos
