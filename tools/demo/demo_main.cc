// ringsync-demo: the main job of `make demo`. Starts a coordinator and N workers on
// loopback, then N training processes (ringsync-train-example) that train a small
// regression model data-parallel, all-reducing gradients through ringsync every step.
// Shows rank 0's training log as it runs, then every rank's verdict, and stops every
// process it started — also on Ctrl-C.
//
// --elastic: the ring is elastic (coordinator --min_world_size=N-1, --max_world_size=N)
// and the trainers run with --elastic (ringsync::ElasticState: commit every step; on a
// membership change roll back, resync, re-shard). A quarter into the run the demo kills
// worker N/2 and its trainer with SIGKILL: the other trainers go on with N-1 ranks. Once
// they have trained a while on N-1, it restarts that worker with a new trainer, which is
// admitted, receives the state through ElasticState::Sync, and the job finishes on N.
// What is checked: every trainer's VERDICT (bitwise identical parameters on every rank,
// equal to 1e-9 relative to the single-process full-batch run of the same steps — which
// holds whatever the world size, because the elastic trainer all-reduces gradient sums
// and divides by the global sample count; see the trainer's source).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/cluster/local_cluster.h"

ABSL_FLAG(int, world_size, 4, "workers and training processes");
ABSL_FLAG(int, steps, 40, "SGD steps each trainer runs");
ABSL_FLAG(int, samples, 8192, "global number of synthetic samples");
ABSL_FLAG(int, features, 16, "features of the regression model");
ABSL_FLAG(bool, elastic, false,
          "kill a worker a quarter into the run, go on with one rank fewer, then restart it "
          "and finish on all ranks (an elastic ring; see the top of the source)");
ABSL_FLAG(absl::Duration, step_pause, absl::Milliseconds(50),
          "with --elastic: each trainer's pause after a step, so that the run lasts long "
          "enough to watch the ring change");

namespace ringsync {
namespace {

std::string BinaryBeside(const std::string& name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}

// Prints what `path` gained since `offset`; returns the new offset.
std::streamoff Follow(const std::string& path, std::streamoff offset, const std::string& prefix) {
  std::ifstream in(path);
  if (!in) return offset;
  in.seekg(offset);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a partial line: print it once complete
    std::printf("%s%s\n", prefix.c_str(), line.c_str());
    offset = in.tellg();
  }
  std::fflush(stdout);
  return offset;
}

// On a fixed ring (no elastic coordinator) the killed worker is down this long.
constexpr absl::Duration kFixedRingOutage = absl::Seconds(2);

// The step rank 0 last reported in `path` ("step   12/40 ..."); 0 before any.
int LastStep(const std::string& path) {
  std::ifstream in(path);
  int step = 0;
  for (std::string line; std::getline(in, line);) {
    int s = 0;
    if (std::sscanf(line.c_str(), "step %d/", &s) == 1) step = s;
  }
  return step;
}

std::vector<std::string> TrainerArgv(const LocalCluster& cluster, int r, bool elastic) {
  std::vector<std::string> argv = {
      BinaryBeside("ringsync-train-example"), "--worker=" + cluster.worker_target(r),
      absl::StrCat("--steps=", absl::GetFlag(FLAGS_steps)),
      absl::StrCat("--samples=", absl::GetFlag(FLAGS_samples)),
      absl::StrCat("--features=", absl::GetFlag(FLAGS_features))};
  if (elastic) {
    argv.push_back("--elastic");
    argv.push_back(absl::StrCat("--step_pause=",
                                absl::FormatDuration(absl::GetFlag(FLAGS_step_pause))));
  }
  return argv;
}

int Run(const std::atomic<bool>& interrupted) {
  const int n = absl::GetFlag(FLAGS_world_size);
  const bool elastic = absl::GetFlag(FLAGS_elastic);
  if (elastic && n < 2) {
    std::fprintf(stderr, "--elastic needs --world_size of at least 2\n");
    return 2;
  }
  LocalClusterOptions options;
  options.world_size = n;
  options.ringsyncd = BinaryBeside("ringsyncd");
  const bool shrinks = elastic && LocalCluster::CoordinatorIsElastic(options.ringsyncd);
  if (elastic && !shrinks) {
    std::printf("== this ringsyncd's coordinator has no --min_world_size: the ring is fixed, so "
                "the others wait (and resync) until the killed worker is back\n");
  }
  if (shrinks) options.min_world_size = n - 1;
  if (elastic) {
    // A lost worker is noticed within about a second (timers at demo scale).
    options.coordinator_flags = {"--heartbeat_interval=100ms", "--heartbeat_timeout=1s"};
  }
  std::printf("== starting a ringsync cluster: 1 coordinator + %d workers on 127.0.0.1\n", n);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::fprintf(stderr, "could not start the cluster: %s\n",
                 std::string(cluster.status().message()).c_str());
    return 1;
  }
  std::printf("   coordinator %s, logs in %s\n", (*cluster)->coordinator_address().c_str(),
              (*cluster)->directory().c_str());
  std::printf("== starting %d training processes (ringsync-train-example), one per worker\n", n);
  std::vector<ChildProcess*> trainers;
  std::vector<std::string> trainer_names;
  for (int r = 0; r < n; ++r) {
    trainer_names.push_back(absl::StrCat("trainer", r));
    absl::StatusOr<ChildProcess*> trainer =
        (*cluster)->Spawn(trainer_names.back(), TrainerArgv(**cluster, r, elastic));
    if (!trainer.ok()) {
      std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
      return 1;
    }
    trainers.push_back(*trainer);
  }
  const std::string rank0_log = (*cluster)->directory() + "/trainer0.log";
  std::streamoff offset = 0;
  // --elastic: what happens to worker `victim`, in order.
  enum class Act { kTrain, kKilled, kRestarted } act = Act::kTrain;
  const int victim = n / 2;
  const int steps = absl::GetFlag(FLAGS_steps);
  int killed_at = 0;
  absl::Time killed_time;
  int running = n;
  while (running > 0 && !interrupted) {
    offset = Follow(rank0_log, offset, "[rank 0] ");
    const int step = elastic ? LastStep(rank0_log) : 0;
    if (elastic && act == Act::kTrain && step >= steps / 4) {
      std::printf("== killing worker %s and its trainer (SIGKILL) at step %d: the others go "
                  "on with %d ranks\n",
                  (*cluster)->worker_id(victim).c_str(), step, shrinks ? n - 1 : n);
      trainers[victim]->Signal(SIGKILL);
      (*cluster)->worker(victim).Signal(SIGKILL);
      trainers[victim]->Wait(absl::Seconds(5)).IgnoreError();
      (*cluster)->worker(victim).Wait(absl::Seconds(5)).IgnoreError();
      killed_at = step;
      killed_time = absl::Now();
      act = Act::kKilled;
    } else if (elastic && act == Act::kKilled &&
               (step >= killed_at + steps / 4 ||
                (!shrinks && absl::Now() > killed_time + kFixedRingOutage))) {
      std::printf("== restarting worker %s with a new trainer at step %d: it is admitted, "
                  "receives the state and the job finishes on %d ranks\n",
                  (*cluster)->worker_id(victim).c_str(), step, n);
      if (absl::Status restarted = (*cluster)->RestartWorker(victim); !restarted.ok()) {
        std::fprintf(stderr, "could not restart the worker: %s\n",
                     std::string(restarted.message()).c_str());
        return 1;
      }
      trainer_names[victim] = absl::StrCat("trainer", victim, "-restarted");
      absl::StatusOr<ChildProcess*> trainer =
          (*cluster)->Spawn(trainer_names[victim], TrainerArgv(**cluster, victim, true));
      if (!trainer.ok()) {
        std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
        return 1;
      }
      trainers[victim] = *trainer;
      act = Act::kRestarted;
    }
    running = 0;
    for (ChildProcess* t : trainers) running += t->running() ? 1 : 0;
    absl::SleepFor(absl::Milliseconds(50));
  }
  Follow(rank0_log, offset, "[rank 0] ");
  if (interrupted) {
    std::printf("== interrupted: stopping every process\n");
    return 130;
  }
  int failures = 0;
  std::printf("== verdicts\n");
  for (int r = 0; r < n; ++r) {
    const int code = trainers[r]->Wait(absl::Seconds(5)).value_or(-1);
    std::string verdict = code == 0 ? "finished; its parameters were compared with every rank's"
                                    : "failed: see its log";
    std::ifstream in((*cluster)->directory() + "/" + trainer_names[r] + ".log");
    for (std::string line; std::getline(in, line);) {
      if (absl::StrContains(line, "VERDICT")) verdict = line;
    }
    std::printf("%s (exit %d): %s\n", trainer_names[r].c_str(), code, verdict.c_str());
    if (code != 0) ++failures;
  }
  if (failures > 0) {
    std::printf("== %d of %d trainers failed; worker logs:\n", failures, n);
    for (int r = 0; r < n; ++r) std::printf("%s\n", (*cluster)->Log((*cluster)->worker_id(r)).c_str());
  }
  std::printf("== stopping the cluster\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a local ringsync cluster and a data-parallel training example on it.");
  absl::ParseCommandLine(argc, argv);
  // Ctrl-C and SIGTERM end the run; the cluster's destructor stops every process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> interrupted{false};
  std::thread watcher([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    interrupted = true;
  });
  watcher.detach();  // blocked in sigwait until a signal; the process exit ends it
  const int code = ringsync::Run(interrupted);
  std::fflush(stdout);
  return code;
}
