// Chaos: real processes (coordinator, four workers, four trainers) hurt while they train —
// a worker killed with SIGKILL, frozen with SIGSTOP below and above its lease, the
// coordinator killed, a straggling trainer. Whatever happens, each scenario ends within a
// hard wall-clock bound with:
//   * no wrong result (each trainer checks every result exactly),
//   * no partial outcome (a collective OK on some surviving ranks and failed on others),
//   * every failure naming a rank or worker,
//   * every trainer through all its steps after the fault (the ring recovered),
// and the daemons' metrics counting what happened. outcome_log.h says how the trainers'
// lines are checked; chaos_job.h how the job is run.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/chaos/chaos_job.h"

namespace ringsync::chaos {
namespace {

// Every scenario, start to end, within this; the trainers are killed (a hang) past it.
constexpr absl::Duration kBound = absl::Seconds(60);
constexpr int kSteps = 60;
constexpr absl::Duration kWarmUp = absl::Seconds(30);  // first steps everywhere (start-up)

std::unique_ptr<ChaosJob> StartJob(std::vector<std::string> coordinator_flags = {},
                                   std::vector<std::string> trainer_flags = {}) {
  ChaosJobOptions options;
  options.ringsyncd = RINGSYNCD_PATH;
  options.trainer = CHAOS_TRAINER_PATH;
  options.make_certs = RINGSYNC_MAKE_CERTS;
  options.worker_flags = {"--collective_timeout=5s", "--connect_timeout=5s"};
  options.coordinator_flags = {"--heartbeat_interval=100ms", "--heartbeat_timeout=1s"};
  options.coordinator_flags.insert(options.coordinator_flags.end(), coordinator_flags.begin(),
                                   coordinator_flags.end());
  // Mixed sizes: inline (16), a few KiB, 1 MiB through shared memory.
  options.trainer_flags = {absl::StrCat("--steps=", kSteps), "--sizes=17,4096,131072",
                           "--timeout=5s", absl::StrCat("--deadline=", absl::FormatDuration(kBound))};
  options.trainer_flags.insert(options.trainer_flags.end(), trainer_flags.begin(),
                               trainer_flags.end());
  absl::StatusOr<std::unique_ptr<ChaosJob>> job = ChaosJob::Start(options);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : nullptr;
}

// Starts a trainer beside every worker and waits until each has run 10 steps.
bool StartTraining(ChaosJob& job) {
  return job.StartTrainers().ok() && job.AwaitOkStepsEverywhere(10, kWarmUp);
}

// The checks every scenario ends with; returns the verdict for more.
Verdict ExpectSafeAndLive(ChaosJob& job, absl::Time started) {
  const std::vector<int> codes = job.AwaitTrainers(started + kBound);
  for (size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(codes[i], 0) << "trainer " << i << " did not finish every step within "
                           << kBound << " (-1: still running, a hang)\n"
                           << job.Diagnostics();
  }
  Verdict verdict = CheckOutcomes(job.Logs());
  std::printf("%s\n", verdict.Summary().c_str());
  EXPECT_EQ(verdict.wrong, 0) << verdict.Summary();
  EXPECT_EQ(verdict.partial, 0) << verdict.Summary();
  EXPECT_EQ(verdict.unnamed_failures, 0) << verdict.Summary();
  return verdict;
}

// Failed calls of the trainers other than `except`, none of which lost its own worker.
std::vector<CallOutcome> SurvivorFailures(ChaosJob& job, int except) {
  std::vector<CallOutcome> failures;
  for (const TrainerLog& log : job.Logs()) {
    if (log.trainer == except) continue;
    for (const CallOutcome& call : log.calls) {
      if (!call.ok) failures.push_back(call);
    }
  }
  return failures;
}

bool NamesWorker(const CallOutcome& call, ChaosJob& job, int i) {
  return absl::StrContains(call.message, absl::StrCat("rank ", i)) ||
         absl::StrContains(call.message, job.cluster().worker_id(i));
}

// Failures the surviving workers counted, all causes.
double FailuresCounted(ChaosJob& job, int except) {
  double sum = 0;
  for (int i = 0; i < job.world_size(); ++i) {
    if (i != except) sum += job.WorkerMetric(i, "ringsync_collectives_failed_total").value_or(0);
  }
  return sum;
}

TEST(Chaos, AWorkerKilledMidCollectiveAndRestartedFailsOneStepEverywhereThenTheJobGoesOn) {
  auto job = StartJob();
  ASSERT_NE(job, nullptr);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(StartTraining(*job)) << job->Diagnostics();
  job->cluster().worker(2).Signal(SIGKILL);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(job->cluster().RestartWorker(2).ok()) << job->Diagnostics();

  ExpectSafeAndLive(*job, started);
  const std::vector<CallOutcome> failures = SurvivorFailures(*job, 2);
  ASSERT_FALSE(failures.empty()) << "the kill failed no collective on the survivors";
  EXPECT_TRUE(NamesWorker(failures.front(), *job, 2))
      << "the first failure after the kill should name rank 2 / w2: " << failures.front().message;
  EXPECT_GE(job->Log(2).connects, 2) << "trainer 2 reconnected to the restarted worker";
  EXPECT_GT(FailuresCounted(*job, 2), 0) << "ringsync_collectives_failed_total";
}

TEST(Chaos, AWorkerFrozenBelowItsLeaseIsWaitedForAndNoResultIsPartial) {
  auto job = StartJob({"--heartbeat_timeout=3s"});
  ASSERT_NE(job, nullptr);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(StartTraining(*job)) << job->Diagnostics();
  job->cluster().worker(1).Signal(SIGSTOP);
  absl::SleepFor(absl::Milliseconds(500));
  job->cluster().worker(1).Signal(SIGCONT);

  const Verdict verdict = ExpectSafeAndLive(*job, started);
  EXPECT_EQ(verdict.failed, 0) << "a freeze below the lease and the deadline fails nothing";
}

// Disabled until the outcome decision (every rank OK or every rank failed) is on main:
// today the ranks whose ring neighbour was not frozen complete the collective in flight
// while the others fail it when the ring dissolves (a partial outcome, issue 13 defect 3b).
TEST(Chaos, DISABLED_AWorkerFrozenAboveItsLeaseFailsTheRingNamingItAndRejoinsWhenResumed) {
  auto job = StartJob();
  ASSERT_NE(job, nullptr);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(StartTraining(*job)) << job->Diagnostics();
  job->cluster().worker(1).Signal(SIGSTOP);
  absl::SleepFor(absl::Milliseconds(2500));  // the lease (heartbeat timeout) is 1 s
  job->cluster().worker(1).Signal(SIGCONT);

  ExpectSafeAndLive(*job, started);
  const std::vector<CallOutcome> failures = SurvivorFailures(*job, 1);
  ASSERT_FALSE(failures.empty()) << "a worker frozen past its lease failed no collective";
  EXPECT_TRUE(NamesWorker(failures.front(), *job, 1))
      << "the first failure should name rank 1 / w1: " << failures.front().message;
}

TEST(Chaos, TheRingKeepsTrainingWhileTheCoordinatorIsDeadAndAfterItRestarts) {
  auto job = StartJob();
  ASSERT_NE(job, nullptr);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(StartTraining(*job)) << job->Diagnostics();
  job->cluster().coordinator().Signal(SIGKILL);
  // The coordinator is not on the data path: every trainer goes on while it is dead.
  EXPECT_TRUE(job->AwaitOkStepsEverywhere(20, absl::Seconds(15)))
      << "training stopped with the coordinator\n" << job->Diagnostics();
  ASSERT_TRUE(job->cluster().RestartCoordinator().ok()) << job->Diagnostics();

  ExpectSafeAndLive(*job, started);
}

TEST(Chaos, AStragglerPastTheDeadlineFailsThatStepOnEveryRankNamingItAndCatchesUp) {
  // Trainer 3 sleeps 2 s before step 12; each collective may take 1 s.
  auto job = StartJob({}, {"--timeout=1s"});
  ASSERT_NE(job, nullptr);
  const absl::Time started = absl::Now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(job->StartTrainer(i).ok());
  ASSERT_TRUE(job->StartTrainer(3, {"--stall_at_step=12", "--stall=2s"}).ok());

  ExpectSafeAndLive(*job, started);
  const std::vector<CallOutcome> failures = SurvivorFailures(*job, 3);
  ASSERT_FALSE(failures.empty()) << "nobody waited for the straggler";
  EXPECT_EQ(failures.front().name, "step/12");
  EXPECT_TRUE(NamesWorker(failures.front(), *job, 3))
      << "the straggler (rank 3 / w3) should be named: " << failures.front().message;
}

}  // namespace
}  // namespace ringsync::chaos
