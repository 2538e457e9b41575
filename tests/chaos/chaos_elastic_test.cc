// Chaos on an elastic ring (coordinator --min_world_size < --max_world_size = 4): a worker
// lost for good leaves the survivors training with exact results of three, and its return
// makes four again; a second loss during the re-form; the coordinator killed during the
// re-form; a worker added mid-run. Each within the hard bound, with the checks of every
// chaos scenario (chaos_scenario.h) and the coordinator's membership metrics.
//
// The trainers' result header names who took part in every collective, so "exact result
// of three" is checked twice: the payload sums to 3x, and three call slots are set.
#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <optional>

#include "tests/chaos/chaos_scenario.h"

namespace ringsync::chaos {
namespace {

// Elastic trainers pace their steps so that a re-form happens mid-run, not after the end.
constexpr int kElasticSteps = 300;
const std::vector<std::string> kElasticTrainer = {absl::StrCat("--steps=", kElasticSteps),
                                                  "--pause=30ms"};

// Whether this build has elastic membership: the coordinator's --min_world_size (asked of
// the binary, so the check follows what is built) and the SDK's membership-change status.
bool ElasticBuild() {
#if __has_include("ringsync/elastic_state.h")
  FILE* help = ::popen(RINGSYNCD_PATH " coordinator --help 2>&1", "r");
  if (help == nullptr) return false;
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), help)) > 0) text.append(buffer, n);
  ::pclose(help);
  return absl::StrContains(text, "min_world_size");
#else
  return false;
#endif
}

#define REQUIRE_ELASTIC_BUILD()                                                          \
  if (!ElasticBuild()) {                                                                 \
    GTEST_SKIP() << "needs elastic membership (coordinator --min_world_size and the "    \
                    "SDK's ringsync/elastic_state.h), which this build does not have";  \
  }

std::unique_ptr<ChaosJob> StartElasticJob(int min_world_size, int started_workers = -1) {
  ChaosJobOptions shape;
  shape.min_world_size = min_world_size;
  shape.started_workers = started_workers;
  return StartJob({}, kElasticTrainer, std::move(shape));
}

// Successful steps of trainer i, returned after `since_us`, in which exactly `ranks`
// trainers took part.
int StepsInRing(ChaosJob& job, int i, int64_t since_us, size_t ranks) {
  const TrainerLog& log = job.Log(i);
  return static_cast<int>(std::count_if(log.calls.begin(), log.calls.end(), [&](const CallOutcome& c) {
    return c.ok && c.t_us >= since_us && c.slots.size() == ranks && absl::StartsWith(c.name, "step/");
  }));
}

// Waits until each of `trainers` has run `n` steps in a ring of `ranks` since `since_us`.
bool AwaitStepsInRing(ChaosJob& job, const std::vector<int>& trainers, int64_t since_us,
                      size_t ranks, int n, absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  for (int i : trainers) {
    while (StepsInRing(job, i, since_us, ranks) < n) {
      if (deadline.Passed()) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  return true;
}

// Waits until a trainer of `trainers` has seen a failure after `since_us` (the ring noticed).
bool AwaitFailure(ChaosJob& job, const std::vector<int>& trainers, int64_t since_us,
                  absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  while (!deadline.Passed()) {
    for (int i : trainers) {
      for (const CallOutcome& call : job.Log(i).calls) {
        if (!call.ok && call.t_us >= since_us) return true;
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// Starts the elastic job, its trainers, and waits for their first steps; `bound` is set
// to the scenario's bound from when the trainers started.
std::unique_ptr<ChaosJob> StartTrainingElastic(int min_world_size,
                                               std::optional<SteadyDeadline>& bound) {
  auto job = StartElasticJob(min_world_size);
  bound.emplace(kBound);
  if (job != nullptr && !StartTraining(*job)) {
    ADD_FAILURE() << "the elastic job did not train\n" << job->Diagnostics();
    return nullptr;
  }
  return job;
}

// Restarts `workers`, then waits until all four trainers run in a ring of four.
void ExpectBackToFour(ChaosJob& job, const std::vector<int>& workers) {
  const int64_t restarted = NowMicros();
  for (int i : workers) ASSERT_TRUE(job.cluster().RestartWorker(i).ok()) << job.Diagnostics();
  EXPECT_TRUE(AwaitStepsInRing(job, {0, 1, 2, 3}, restarted, 4, 5, absl::Seconds(20)))
      << "the returning workers were not admitted\n" << job.Diagnostics();
}

void ExpectMembershipCounted(ChaosJob& job, double evictions, double changes) {
  EXPECT_GE(job.CoordinatorMetric("ringsync_evictions_total").value_or(0), evictions)
      << "ringsync_evictions_total";
  EXPECT_GE(job.CoordinatorMetric("ringsync_membership_changes_total").value_or(0), changes)
      << "ringsync_membership_changes_total";
}

TEST(ElasticChaos, AWorkerKilledForGoodLeavesThreeRanksWithExactResultsAndItsReturnMakesFour) {
  REQUIRE_ELASTIC_BUILD();
  std::optional<SteadyDeadline> bound;
  auto job = StartTrainingElastic(3, bound);
  ASSERT_NE(job, nullptr);
  const int64_t killed = NowMicros();
  job->cluster().worker(2).Signal(SIGKILL);
  EXPECT_TRUE(AwaitStepsInRing(*job, {0, 1, 3}, killed, 3, 5, absl::Seconds(20)))
      << "the survivors did not go on as a ring of three\n" << job->Diagnostics();
  ExpectBackToFour(*job, {2});

  ExpectSafeAndLive(*job, *bound);
  bool told = false;
  for (const CallOutcome& call : SurvivorFailures(*job, 2)) told = told || call.membership_changed;
  EXPECT_TRUE(told) << "no survivor was told the membership changed";
  ExpectMembershipCounted(*job, 1, 2);
  double counted = 0;
  for (int i : {0, 1, 3}) {
    counted += job->WorkerMetric(i, "ringsync_collectives_failed_total",
                                 "cause=\"membership_changed\"").value_or(0);
  }
  EXPECT_GT(counted, 0) << "ringsync_collectives_failed_total{cause=\"membership_changed\"}";
}

TEST(ElasticChaos, ASecondWorkerKilledDuringTheReFormLeavesTwoRanksThenBothReturn) {
  REQUIRE_ELASTIC_BUILD();
  std::optional<SteadyDeadline> bound;
  auto job = StartTrainingElastic(2, bound);
  ASSERT_NE(job, nullptr);
  const int64_t killed = NowMicros();
  job->cluster().worker(2).Signal(SIGKILL);
  ASSERT_TRUE(AwaitFailure(*job, {0, 1, 3}, killed, absl::Seconds(10))) << job->Diagnostics();
  job->cluster().worker(3).Signal(SIGKILL);  // the ring is re-forming
  EXPECT_TRUE(AwaitStepsInRing(*job, {0, 1}, killed, 2, 5, absl::Seconds(20)))
      << "the two survivors did not go on as a ring of two\n" << job->Diagnostics();
  ExpectBackToFour(*job, {2, 3});

  ExpectSafeAndLive(*job, *bound);
  ExpectMembershipCounted(*job, 2, 2);
}

TEST(ElasticChaos, TheCoordinatorKilledDuringTheReFormComesBackAndTheSurvivorsGoOn) {
  REQUIRE_ELASTIC_BUILD();
  std::optional<SteadyDeadline> bound;
  auto job = StartTrainingElastic(3, bound);
  ASSERT_NE(job, nullptr);
  const int64_t killed = NowMicros();
  job->cluster().worker(2).Signal(SIGKILL);
  ASSERT_TRUE(AwaitFailure(*job, {0, 1, 3}, killed, absl::Seconds(10))) << job->Diagnostics();
  job->cluster().coordinator().Signal(SIGKILL);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(job->cluster().RestartCoordinator().ok()) << job->Diagnostics();
  EXPECT_TRUE(AwaitStepsInRing(*job, {0, 1, 3}, killed, 3, 5, absl::Seconds(20)))
      << "no ring of three after the coordinator came back\n" << job->Diagnostics();
  ExpectBackToFour(*job, {2});

  ExpectSafeAndLive(*job, *bound);
}

TEST(ElasticChaos, AWorkerAddedMidRunIsAdmittedAtACollectiveBoundary) {
  REQUIRE_ELASTIC_BUILD();
  auto job = StartElasticJob(3, /*started_workers=*/3);
  ASSERT_NE(job, nullptr);
  const SteadyDeadline bound(kBound);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(job->StartTrainer(i).ok());
  ASSERT_TRUE(AwaitStepsInRing(*job, {0, 1, 2}, 0, 3, 10, kWarmUp)) << job->Diagnostics();
  const int64_t added = NowMicros();
  ASSERT_TRUE(job->cluster().RestartWorker(3).ok()) << job->Diagnostics();
  ASSERT_TRUE(job->StartTrainer(3).ok());
  EXPECT_TRUE(AwaitStepsInRing(*job, {0, 1, 2, 3}, added, 4, 5, absl::Seconds(20)))
      << "the fourth worker was not admitted\n" << job->Diagnostics();

  ExpectSafeAndLive(*job, bound);
  ExpectMembershipCounted(*job, 0, 2);
}

}  // namespace
}  // namespace ringsync::chaos
