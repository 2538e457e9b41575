// ringsync-local-cluster: starts a LocalCluster (one coordinator, N workers on 127.0.0.1)
// for scripts such as bench/compare_with_gloo.sh, prints the workers' SDK targets one per
// line, and runs until SIGINT or SIGTERM, then stops every process and removes its
// directory. If a worker dies meanwhile it says so and exits 1 (stopping the rest).
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

int Run() {
  // Blocked before any thread exists so only sigtimedwait below sees them; children
  // unblock everything before exec (ChildProcess), so they still stop on SIGTERM.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  LocalClusterOptions options;
  options.world_size = absl::GetFlag(FLAGS_world_size);
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
  std::string targets, pids;
  for (int i = 0; i < (*cluster)->world_size(); ++i) {
    targets += (*cluster)->worker_target(i) + "\n";
    pids += std::to_string((*cluster)->worker(i).pid()) + "\n";
  }
  const std::string pids_file = absl::GetFlag(FLAGS_pids_file);
  if (!pids_file.empty() && !WriteWhole(pids_file, pids)) {
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

  const timespec poll = {1, 0};
  while (::sigtimedwait(&stop_signals, nullptr, &poll) < 0) {
    for (int i = 0; i < (*cluster)->world_size(); ++i) {
      if ((*cluster)->worker(i).running()) continue;
      std::fprintf(stderr, "ringsync-local-cluster: worker %s exited; its log:\n%s\n",
                   (*cluster)->worker_id(i).c_str(), (*cluster)->Log((*cluster)->worker_id(i)).c_str());
      return 1;
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
