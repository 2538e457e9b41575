// ringsync-demo: the main job of `make demo`. Starts a coordinator and N workers on
// loopback, then N training processes (ringsync-train-example) that train a small
// regression model data-parallel, all-reducing gradients through ringsync every step.
// Shows rank 0's training log as it runs, then every rank's verdict, and stops every
// process it started — also on Ctrl-C.
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

int Run(const std::atomic<bool>& interrupted) {
  const int n = absl::GetFlag(FLAGS_world_size);
  LocalClusterOptions options;
  options.world_size = n;
  options.ringsyncd = BinaryBeside("ringsyncd");
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
  for (int r = 0; r < n; ++r) {
    absl::StatusOr<ChildProcess*> trainer = (*cluster)->Spawn(
        absl::StrCat("trainer", r),
        {BinaryBeside("ringsync-train-example"), "--worker=" + (*cluster)->worker_target(r),
         absl::StrCat("--steps=", absl::GetFlag(FLAGS_steps)),
         absl::StrCat("--samples=", absl::GetFlag(FLAGS_samples)),
         absl::StrCat("--features=", absl::GetFlag(FLAGS_features))});
    if (!trainer.ok()) {
      std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
      return 1;
    }
    trainers.push_back(*trainer);
  }
  const std::string rank0_log = (*cluster)->directory() + "/trainer0.log";
  std::streamoff offset = 0;
  int running = n;
  while (running > 0 && !interrupted) {
    offset = Follow(rank0_log, offset, "[rank 0] ");
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
    std::ifstream in((*cluster)->directory() + absl::StrCat("/trainer", r, ".log"));
    for (std::string line; std::getline(in, line);) {
      if (absl::StrContains(line, "VERDICT")) verdict = line;
    }
    std::printf("rank %d (exit %d): %s\n", r, code, verdict.c_str());
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
