// ringsync-local-cluster: starts a LocalCluster (one coordinator, N workers on 127.0.0.1)
// for scripts such as bench/compare_with_gloo.sh, prints the workers' SDK targets one per
// line, and runs until SIGINT or SIGTERM, then stops every process and removes its
// directory. If a worker dies meanwhile it says so and exits 1 (stopping the rest) —
// unless --on_worker_exit=wait: then it says so and goes on (an elastic ring carries on
// without it), and SIGUSR1 starts every worker that has exited again, as a supervisor
// would (same id, socket and port; --pids_file rewritten once it is ready).
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "daemon/process/help_filter.h"
#include "tools/cluster/local_cluster.h"

ABSL_FLAG(int, world_size, 4, "workers (ranks) to start");
ABSL_FLAG(int, min_world_size, 0,
          "an elastic ring: the coordinator goes on with at least this many workers (and "
          "takes up to --world_size); 0: a fixed ring of --world_size");
ABSL_FLAG(std::string, ringsyncd, "", "the ringsyncd binary; default: ringsyncd next to this program");
ABSL_FLAG(std::string, targets_file, "",
          "write the worker targets here (one per line) instead of stdout; written whole, "
          "then renamed into place, so a reader never sees part of it");
ABSL_FLAG(std::string, pids_file, "", "also write the worker PIDs here, one per line, rank order");
ABSL_FLAG(std::vector<std::string>, worker_flags, {}, "extra flags for every worker, comma-separated");
ABSL_FLAG(std::vector<std::string>, coordinator_flags, {}, "extra coordinator flags, comma-separated");
ABSL_FLAG(std::string, security, "token",
          "how the daemons authenticate: token (a random cluster token in the cluster's private "
          "directory), tls (mutual TLS, certificates made there by make-certs.sh) or insecure");
ABSL_FLAG(std::string, make_certs, RINGSYNC_MAKE_CERTS, "deploy/make-certs.sh, for --security=tls");
ABSL_FLAG(std::string, on_worker_exit, "stop",
          "stop: a worker that exits stops the cluster (exit 1); wait: the rest go on, and "
          "SIGUSR1 starts every exited worker again (its id, socket and port)");

namespace ringsync {
namespace {

bool WriteWhole(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  return !error;
}

std::string PidsOf(LocalCluster& cluster) {
  std::string pids;
  for (int i = 0; i < cluster.world_size(); ++i) pids += std::to_string(cluster.worker(i).pid()) + "\n";
  return pids;
}

// --on_worker_exit=wait, on SIGUSR1: starts every exited worker again and rewrites the
// pids file. False (after saying why) if one cannot be started.
bool RestartExitedWorkers(LocalCluster& cluster, const std::string& pids_file) {
  for (int i = 0; i < cluster.world_size(); ++i) {
    if (cluster.worker(i).running()) continue;
    if (absl::Status s = cluster.RestartWorker(i); !s.ok()) {
      std::fprintf(stderr, "ringsync-local-cluster: cannot restart worker %s: %s\n",
                   cluster.worker_id(i).c_str(), s.ToString().c_str());
      return false;
    }
    std::fprintf(stderr, "ringsync-local-cluster: worker %s started again (pid %d)\n",
                 cluster.worker_id(i).c_str(), static_cast<int>(cluster.worker(i).pid()));
  }
  if (!pids_file.empty() && !WriteWhole(pids_file, PidsOf(cluster))) {
    std::fprintf(stderr, "ringsync-local-cluster: cannot write %s\n", pids_file.c_str());
    return false;
  }
  return true;
}

int Run() {
  // Blocked before any thread exists so only sigtimedwait below sees them; children
  // unblock everything before exec (ChildProcess), so they still stop on SIGTERM.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const std::string on_worker_exit = absl::GetFlag(FLAGS_on_worker_exit);
  if (on_worker_exit != "stop" && on_worker_exit != "wait") {
    std::fprintf(stderr, "ringsync-local-cluster: --on_worker_exit must be stop or wait\n");
    return 2;
  }

  LocalClusterOptions options;
  options.world_size = absl::GetFlag(FLAGS_world_size);
  options.min_world_size = absl::GetFlag(FLAGS_min_world_size);
  options.ringsyncd = absl::GetFlag(FLAGS_ringsyncd);
  if (options.ringsyncd.empty()) {
    options.ringsyncd = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "ringsyncd").string();
  }
  options.worker_flags = absl::GetFlag(FLAGS_worker_flags);
  options.coordinator_flags = absl::GetFlag(FLAGS_coordinator_flags);
  const std::string security = absl::GetFlag(FLAGS_security);
  if (security == "tls") {
    options.security = ClusterSecurity::kMutualTls;
  } else if (security == "insecure") {
    options.security = ClusterSecurity::kInsecure;
  } else if (security != "token") {
    std::fprintf(stderr, "ringsync-local-cluster: --security must be token, tls or insecure\n");
    return 2;
  }
  options.make_certs = absl::GetFlag(FLAGS_make_certs);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::fprintf(stderr, "ringsync-local-cluster: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  std::string targets;
  for (int i = 0; i < (*cluster)->world_size(); ++i) targets += (*cluster)->worker_target(i) + "\n";
  const std::string pids_file = absl::GetFlag(FLAGS_pids_file);
  if (!pids_file.empty() && !WriteWhole(pids_file, PidsOf(**cluster))) {
    std::fprintf(stderr, "ringsync-local-cluster: cannot write %s\n", pids_file.c_str());
    return 1;
  }
  // Targets last: their appearance tells a script that everything is in place.
  const std::string targets_file = absl::GetFlag(FLAGS_targets_file);
  if (targets_file.empty()) {
    std::fputs(targets.c_str(), stdout);
    std::fflush(stdout);
  } else if (!WriteWhole(targets_file, targets)) {
    std::fprintf(stderr, "ringsync-local-cluster: cannot write %s\n", targets_file.c_str());
    return 1;
  }

  const bool wait = on_worker_exit == "wait";
  std::vector<bool> reported((*cluster)->world_size(), false);
  const timespec poll = {0, 200'000'000};
  for (;;) {
    const int signal = ::sigtimedwait(&signals, nullptr, &poll);
    if (signal == SIGINT || signal == SIGTERM) break;
    if (signal == SIGUSR1 && wait) {
      if (!RestartExitedWorkers(**cluster, pids_file)) return 1;
      reported.assign(reported.size(), false);
    }
    for (int i = 0; i < (*cluster)->world_size(); ++i) {
      if (reported[i] || (*cluster)->worker(i).running()) continue;
      std::fprintf(stderr, "ringsync-local-cluster: worker %s exited%s; its log:\n%s\n",
                   (*cluster)->worker_id(i).c_str(),
                   wait ? " (the others go on; SIGUSR1 starts it again)" : "",
                   (*cluster)->Log((*cluster)->worker_id(i)).c_str());
      if (!wait) return 1;
      reported[i] = true;
    }
  }
  return 0;  // ~LocalCluster stops the processes and removes the directory
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "starts a ringsync cluster on 127.0.0.1 (coordinator + N workers), prints the worker "
      "targets, runs until SIGINT/SIGTERM:\n  ringsync-local-cluster --world_size=4 "
      "--targets_file=/tmp/targets");
  absl::SetFlagsUsageConfig(ringsync::HelpListingFlagsFrom("tools/cluster/local_cluster_main.cc"));
  absl::ParseCommandLine(argc, argv);
  return ringsync::Run();
}
