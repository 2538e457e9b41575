// The chaos tests' shared steps (chaos_test.cc, chaos_elastic_test.cc): a job of real
// processes started at 100 ms-scale leases, trainers started and warmed up, and the checks
// every scenario ends with. Test-only (gtest assertions inside).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/chaos/chaos_job.h"

namespace ringsync::chaos {

// Every scenario, start to end, within this; the trainers are killed (a hang) past it.
inline constexpr absl::Duration kBound = absl::Seconds(60);
inline constexpr int kSteps = 60;
inline constexpr absl::Duration kWarmUp = absl::Seconds(30);  // first steps everywhere (start-up)

// A job of four workers (a fixed-size ring unless `shape` says otherwise), leases at
// 100 ms scale: heartbeats every 100 ms, lost after 1 s; each collective's deadline 5 s.
inline std::unique_ptr<ChaosJob> StartJob(std::vector<std::string> coordinator_flags = {},
                                   std::vector<std::string> trainer_flags = {},
                                   ChaosJobOptions shape = {}) {
  ChaosJobOptions options = std::move(shape);
  options.ringsyncd = RINGSYNCD_PATH;
  options.trainer = CHAOS_TRAINER_PATH;
  options.make_certs = RINGSYNC_MAKE_CERTS;
  options.worker_flags.insert(options.worker_flags.begin(),
                              {"--collective_timeout=5s", "--connect_timeout=5s"});
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
inline bool StartTraining(ChaosJob& job) {
  return job.StartTrainers().ok() && job.AwaitOkStepsEverywhere(10, kWarmUp);
}

// The checks every scenario ends with; returns the verdict for more.
// `bound`: kBound from when the trainers started.
inline Verdict ExpectSafeAndLive(ChaosJob& job, const SteadyDeadline& bound) {
  const std::vector<int> codes = job.AwaitTrainers(bound);
  for (size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(codes[i], 0) << "trainer " << i << " did not finish every step within "
                           << kBound << " (-1: still running, a hang)\n"
                           << job.Diagnostics();
  }
  EXPECT_THAT(SharedMemoryFilesOf(job.TrainerPids()), ::testing::IsEmpty())
      << "the trainers' shared-memory files outlived them";
  Verdict verdict = CheckOutcomes(job.Logs());
  std::printf("%s\n", verdict.Summary().c_str());
  EXPECT_EQ(verdict.wrong, 0) << verdict.Summary();
  EXPECT_EQ(verdict.partial, 0) << verdict.Summary();
  EXPECT_EQ(verdict.unnamed_failures, 0) << verdict.Summary();
  return verdict;
}

// Failed calls of the trainers other than `except`, none of which lost its own worker.
inline std::vector<CallOutcome> SurvivorFailures(ChaosJob& job, int except) {
  std::vector<CallOutcome> failures;
  for (const TrainerLog& log : job.Logs()) {
    if (log.trainer == except) continue;
    for (const CallOutcome& call : log.calls) {
      if (!call.ok) failures.push_back(call);
    }
  }
  return failures;
}

inline bool NamesWorker(const CallOutcome& call, ChaosJob& job, int i) {
  return absl::StrContains(call.message, absl::StrCat("rank ", i)) ||
         absl::StrContains(call.message, job.cluster().worker_id(i));
}

// Failures the surviving workers counted, all causes.
inline double FailuresCounted(ChaosJob& job, int except) {
  double sum = 0;
  for (int i = 0; i < job.world_size(); ++i) {
    if (i != except) sum += job.WorkerMetric(i, "ringsync_collectives_failed_total").value_or(0);
  }
  return sum;
}

}  // namespace ringsync::chaos
