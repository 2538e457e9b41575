// ringsync-time-to-error: how long each rank takes to learn of a fault, on real
// processes (a LocalCluster: a coordinator and N workers on this machine; the training
// processes are SDK clients on threads of this program, the faulted one a child process
// where the fault is its death). A measurement, not a test: it prints, per fault, every
// rank's median time from the fault to its collective's error over --trials, and the
// error the first trial saw.
//
// Faults (rank N-1 is the victim; the other ranks are inside an all-reduce that waits
// for it when the fault strikes):
//   trainer-kill  its training process is killed with SIGKILL (its worker lives);
//   worker-kill   its worker is killed with SIGKILL;
//   worker-stop   its worker is frozen with SIGSTOP (SIGCONT after the trial);
//   slow-rank     its training process calls the collective only after the deadline;
//   worker-kill-mid  every rank, the victim too, is inside a 64 MiB all-reduce when the
//                 victim's worker is killed with SIGKILL (the victim's own client is
//                 measured as well: it lost its worker).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "ringsync/client.h"
#include "tools/cluster/local_cluster.h"

ABSL_FLAG(int, world_size, 4, "workers, 2..8");
ABSL_FLAG(int, trials, 3, "trials per fault");
ABSL_FLAG(std::string, faults, "trainer-kill,worker-kill,worker-stop,slow-rank,worker-kill-mid",
          "comma-separated faults to measure");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(10), "each collective's deadline");
ABSL_FLAG(absl::Duration, lease, absl::Seconds(2), "the coordinator's --heartbeat_timeout");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Milliseconds(200),
          "the coordinator's --heartbeat_interval");
ABSL_FLAG(absl::Duration, mid_fault_after, absl::Seconds(1),
          "worker-kill-mid: how long after the ranks call the worker is killed (the ranks "
          "should be streaming by then)");
ABSL_FLAG(std::string, worker_flags, "",
          "extra worker flags, space-separated");

namespace ringsync {
namespace {

constexpr absl::Duration kBeforeFault = absl::Milliseconds(300);  // ranks settle into the wait

struct Trial {
  std::vector<absl::Duration> to_error;  // per surviving rank; from the fault
  std::vector<std::string> errors;
};

absl::StatusOr<std::unique_ptr<Client>> ConnectRank(LocalCluster& cluster, int r) {
  ClientOptions options;
  options.connect_timeout = absl::Seconds(30);
  options.client_name = absl::StrCat("time-to-error rank ", r);
  return Client::Connect(cluster.worker_target(r), options);
}

absl::StatusOr<Trial> RunTrial(const std::string& fault) {
  const int n = absl::GetFlag(FLAGS_world_size);
  const absl::Duration deadline = absl::GetFlag(FLAGS_deadline);
  LocalClusterOptions options;
  options.world_size = n;
  options.ringsyncd = RINGSYNCD_PATH;
  options.security = ClusterSecurity::kInsecure;
  options.coordinator_flags = {
      absl::StrCat("--heartbeat_timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_lease))),
      absl::StrCat("--heartbeat_interval=",
                   absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_interval)))};
  for (absl::string_view flag :
       absl::StrSplit(absl::GetFlag(FLAGS_worker_flags), ' ', absl::SkipEmpty())) {
    options.worker_flags.emplace_back(flag);
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
  if (!started.ok()) return started.status();
  LocalCluster& cluster = **started;
  const int victim = n - 1;

  std::vector<std::unique_ptr<Client>> clients(static_cast<size_t>(n));
  ChildProcess* trainer = nullptr;
  for (int r = 0; r < n; ++r) {
    if (r == victim && fault == "trainer-kill") {
      absl::StatusOr<ChildProcess*> child =
          cluster.Spawn("trainer", {TEST_CLIENT_PATH, "--worker=" + cluster.worker_target(r),
                                    "--iterations=0", "--linger=120s"});
      if (!child.ok()) return child.status();
      trainer = *child;
      continue;
    }
    absl::StatusOr<std::unique_ptr<Client>> client = ConnectRank(cluster, r);
    if (!client.ok()) return client.status();
    clients[static_cast<size_t>(r)] = *std::move(client);
  }
  // Everyone's first collective succeeds (the ring is up) unless the victim is a child.
  absl::SleepFor(absl::Milliseconds(500));

  const bool mid = fault == "worker-kill-mid";
  const int measured = mid ? n : victim;  // the ranks whose clients call
  const size_t elements = mid ? size_t{16} << 20 : 1024;
  std::vector<std::vector<float>> grads(static_cast<size_t>(measured),
                                        std::vector<float>(elements, 1.0f));
  Trial trial;
  trial.to_error.resize(static_cast<size_t>(measured));
  trial.errors.resize(static_cast<size_t>(measured));
  absl::Time fault_at = absl::InfiniteFuture();
  std::vector<absl::Time> failed_at(static_cast<size_t>(measured));
  {
    std::vector<std::jthread> ranks;
    for (int r = 0; r < measured; ++r) {
      ranks.emplace_back([&, r] {
        std::vector<float>& grad = grads[static_cast<size_t>(r)];
        AllReduceOptions call;
        call.timeout = deadline;
        absl::Status s = clients[static_cast<size_t>(r)]->AllReduce(
            "measured", absl::MakeSpan(grad), ReduceOp::kSum, call);
        failed_at[static_cast<size_t>(r)] = absl::Now();
        trial.errors[static_cast<size_t>(r)] = s.ok() ? "OK (no error!)" : s.ToString();
      });
    }
    absl::SleepFor(mid ? absl::GetFlag(FLAGS_mid_fault_after) : kBeforeFault);
    fault_at = absl::Now();
    if (fault == "trainer-kill") {
      trainer->Signal(SIGKILL);
    } else if (fault == "worker-kill" || mid) {
      cluster.worker(victim).Signal(SIGKILL);
    } else if (fault == "worker-stop") {
      cluster.worker(victim).Signal(SIGSTOP);
    } else if (fault == "slow-rank") {
      ranks.emplace_back([&] {
        absl::SleepFor(deadline + absl::Seconds(1));
        std::vector<float> grad(1024, 1.0f);
        AllReduceOptions call;
        call.timeout = absl::Seconds(2);
        clients[static_cast<size_t>(victim)]
            ->AllReduce("measured", absl::MakeSpan(grad), ReduceOp::kSum, call)
            .IgnoreError();
      });
    }
  }  // joins every rank
  if (fault == "worker-stop") cluster.worker(victim).Signal(SIGCONT);
  for (int r = 0; r < measured; ++r) {
    trial.to_error[static_cast<size_t>(r)] = failed_at[static_cast<size_t>(r)] - fault_at;
  }
  clients.clear();
  return trial;
}

int Main() {
  const int n = absl::GetFlag(FLAGS_world_size);
  if (n < 2 || n > 8) {
    std::fprintf(stderr, "--world_size must be 2..8\n");
    return 2;
  }
  std::printf("# time from the fault to each rank's error (median of %d), N=%d, deadline %s, "
              "lease %s, heartbeat every %s; rank %d is the victim\n",
              absl::GetFlag(FLAGS_trials), n,
              absl::FormatDuration(absl::GetFlag(FLAGS_deadline)).c_str(),
              absl::FormatDuration(absl::GetFlag(FLAGS_lease)).c_str(),
              absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_interval)).c_str(), n - 1);
  for (absl::string_view fault_name :
       absl::StrSplit(absl::GetFlag(FLAGS_faults), ',', absl::SkipEmpty())) {
    const std::string fault(fault_name);
    std::vector<std::vector<absl::Duration>> per_rank(static_cast<size_t>(n));
    std::string first_errors;
    for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
      absl::StatusOr<Trial> trial = RunTrial(fault);
      if (!trial.ok()) {
        std::fprintf(stderr, "%s trial %d: %s\n", fault.c_str(), t,
                     std::string(trial.status().message()).c_str());
        return 1;
      }
      for (int r = 0; r < static_cast<int>(trial->to_error.size()); ++r) {
        per_rank[static_cast<size_t>(r)].push_back(trial->to_error[static_cast<size_t>(r)]);
        if (t == 0) {
          absl::StrAppend(&first_errors, "    rank ", r, ": ",
                          trial->errors[static_cast<size_t>(r)], "\n");
        }
      }
    }
    std::printf("%-13s", fault.c_str());
    for (int r = 0; r < n; ++r) {
      std::vector<absl::Duration>& times = per_rank[static_cast<size_t>(r)];
      if (times.empty()) continue;
      std::sort(times.begin(), times.end());
      std::printf("  rank %d: %7.3f s", r,
                  absl::ToDoubleSeconds(times[times.size() / 2]));
    }
    std::printf("\n%s", first_errors.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringsync::Main();
}
