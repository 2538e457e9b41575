// The example trainer, run as real processes against a FakeRing of in-process workers:
// its verdict is OK on an honest ring and FAILED when the ring lies.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/test/fake_worker.h"
#include "core/sync/steady_deadline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace ringsync {
namespace {

using ::ringsync::testing::FakeRing;
using ::ringsync::testing::FakeWorker;
using ::testing::HasSubstr;

struct Outcome {
  int exit_code = -1;
  std::string output;
};

// Runs one ringsync-train-example per worker, all at once; kills any still running after
// 60 s.
std::vector<Outcome> RunTrainers(const std::vector<std::unique_ptr<FakeWorker>>& workers,
                                 const std::vector<std::string>& extra_flags) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          absl::StrCat("ringsync-train-example-test-", getpid());
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (size_t r = 0; r < workers.size(); ++r) {
    std::vector<std::string> args = {
        RINGSYNC_TRAIN_EXAMPLE, "--worker=" + workers[r]->unix_target(), "--connect_timeout=20s"};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string log = absl::StrCat(dir, "/rank", r, ".log");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    pids.push_back(pid);
  }
  std::vector<Outcome> outcomes(workers.size());
  const SteadyDeadline deadline(absl::Seconds(60));
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    while (pids[r] > 0 && waitpid(pids[r], &status, WNOHANG) == 0) {
      if (deadline.Passed()) {
        ADD_FAILURE() << "trainer " << r << " still running after 60 s; killing it";
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    outcomes[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in(absl::StrCat(dir, "/rank", r, ".log"));
    outcomes[r].output.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove_all(dir);
  return outcomes;
}

std::vector<std::unique_ptr<FakeWorker>> StartRing(FakeRing& ring) {
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (int r = 0; r < ring.world_size(); ++r) {
    workers.push_back(std::make_unique<FakeWorker>());
    workers.back()->JoinRing(&ring, r);
    workers.back()->Start();
  }
  return workers;
}

TEST(TrainExampleTest, FourRanksAgreeWithTheFullBatchRun) {
  FakeRing ring(4);
  std::vector<std::unique_ptr<FakeWorker>> workers = StartRing(ring);
  std::vector<Outcome> outcomes = RunTrainers(workers, {"--steps=30"});
  std::cout << "rank 0 printed:\n" << outcomes[0].output;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exit_code, 0) << "rank " << r << ":\n" << outcomes[r].output;
  }
  EXPECT_THAT(outcomes[0].output, HasSubstr("step   30/30  loss"));
  EXPECT_THAT(outcomes[0].output,
              HasSubstr("VERDICT: OK — 4 ranks hold bitwise identical parameters; "
                        "max |w - w_fullbatch| = "));
  EXPECT_EQ(outcomes[1].output, "") << "only rank 0 reports when all is well";
}

TEST(TrainExampleTest, SumInsteadOfAverageIsCaught) {
  FakeRing ring(2, FakeRing::Fault::kSumForAvg);
  std::vector<std::unique_ptr<FakeWorker>> workers = StartRing(ring);
  std::vector<Outcome> outcomes = RunTrainers(workers, {"--steps=10"});
  for (const Outcome& outcome : outcomes) {
    EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
    EXPECT_THAT(outcome.output, HasSubstr("VERDICT: FAILED"));
    EXPECT_THAT(outcome.output, HasSubstr("exceeds the tolerance"));
  }
}

TEST(TrainExampleTest, OneUlpOfDisagreementBetweenRanksIsCaught) {
  FakeRing ring(3, FakeRing::Fault::kPerturbLastRank);
  std::vector<std::unique_ptr<FakeWorker>> workers = StartRing(ring);
  std::vector<Outcome> outcomes = RunTrainers(workers, {"--steps=5", "--samples=300"});
  for (const Outcome& outcome : outcomes) {
    EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
    EXPECT_THAT(outcome.output, HasSubstr("not bitwise identical"));
  }
}

TEST(TrainExampleTest, SamplesMustSplitEvenly) {
  FakeRing ring(3);
  std::vector<std::unique_ptr<FakeWorker>> workers = StartRing(ring);
  std::vector<Outcome> outcomes = RunTrainers(workers, {"--samples=1000"});
  for (const Outcome& outcome : outcomes) {
    EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
    EXPECT_THAT(outcome.output, HasSubstr("--samples=1000 does not split into 3 equal shards"));
    EXPECT_THAT(outcome.output, HasSubstr("(e.g. 1002)"));
  }
}

}  // namespace
}  // namespace ringsync
