// ringsync-chaos-measure: what faults cost a running job, measured on real processes
// (a coordinator, N workers and N ringsync-chaos-trainers on this machine; the chaos
// tests' ChaosJob). Measurements, not tests: it prints figures and exits 0 unless a
// result was wrong, partial or hung.
//
//   --mode=reform  20 trials (--trials): a worker killed with SIGKILL and restarted at
//                  once; time from the kill, and from the first failure a survivor saw
//                  (detection), to the first successful collective on every rank.
//                  With --elastic (the coordinator's --min_world_size below N) the killed
//                  worker stays away until the survivors have re-formed and succeeded
//                  (the loss), then comes back (the restart): both timed.
//   --mode=soak    --collectives all-reduces of mixed sizes (--sizes) on N ranks with a
//                  fault every --fault_every (rotating: worker SIGKILL + restart (with
//                  --elastic after a second on the survivors), SIGSTOP
//                  below and above the lease, coordinator SIGKILL + restart); counts wrong,
//                  hung and partial outcomes; the workers' RSS and open fds at start and
//                  end; the SDK's /dev/shm files left at the end.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/chaos/chaos_job.h"

ABSL_FLAG(std::string, mode, "reform", "reform or soak");
ABSL_FLAG(int, world_size, 4, "workers (and trainers), 2..8");
ABSL_FLAG(int, trials, 20, "reform: trials");
ABSL_FLAG(int64_t, collectives, 100000, "soak: successful all-reduces every rank runs");
ABSL_FLAG(int64_t, fault_every, 2000, "soak: collectives between two faults");
ABSL_FLAG(std::string, sizes, "17,1000,65536,262144",
          "int64 element counts the collectives cycle through (262144 = 2 MiB, shared memory)");
ABSL_FLAG(bool, elastic, false,
          "the ring re-forms without a lost worker (coordinator --min_world_size=N-1)");
ABSL_FLAG(absl::Duration, lease, absl::Seconds(1), "the coordinator's --heartbeat_timeout");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(5), "each collective's deadline");
ABSL_FLAG(absl::Duration, stall_limit, absl::Seconds(60),
          "no progress on any rank this long is a hang: the run stops");
ABSL_FLAG(std::vector<std::string>, coordinator_flag, {}, "more coordinator flags");
ABSL_FLAG(std::vector<std::string>, worker_flag, {}, "more worker flags");
ABSL_FLAG(std::string, ringsyncd, RINGSYNCD_PATH, "the ringsyncd binary");
ABSL_FLAG(std::string, trainer, CHAOS_TRAINER_PATH, "the ringsync-chaos-trainer binary");
ABSL_FLAG(std::string, make_certs, RINGSYNC_MAKE_CERTS, "deploy/make-certs.sh");

namespace ringsync::chaos {
namespace {

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(i, values.size() - 1)];
}

std::string Stats(const std::string& what, const std::vector<double>& ms) {
  if (ms.empty()) return absl::StrCat(what, ": no samples");
  return absl::StrFormat("%s: n=%d p50 %.0f ms, p99 %.0f ms, min %.0f, max %.0f", what,
                         ms.size(), Percentile(ms, 0.5), Percentile(ms, 0.99),
                         *std::min_element(ms.begin(), ms.end()),
                         *std::max_element(ms.begin(), ms.end()));
}

absl::StatusOr<std::unique_ptr<ChaosJob>> StartJob(std::vector<std::string> trainer_flags) {
  const int n = absl::GetFlag(FLAGS_world_size);
  ChaosJobOptions options;
  options.world_size = n;
  options.ringsyncd = absl::GetFlag(FLAGS_ringsyncd);
  options.trainer = absl::GetFlag(FLAGS_trainer);
  options.make_certs = absl::GetFlag(FLAGS_make_certs);
  options.worker_flags = {
      absl::StrCat("--collective_timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_collective_timeout))),
      "--connect_timeout=5s"};
  for (const std::string& f : absl::GetFlag(FLAGS_worker_flag)) options.worker_flags.push_back(f);
  options.coordinator_flags = {
      "--heartbeat_interval=100ms",
      absl::StrCat("--heartbeat_timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_lease)))};
  if (absl::GetFlag(FLAGS_elastic)) options.min_world_size = n - 1;
  for (const std::string& f : absl::GetFlag(FLAGS_coordinator_flag)) {
    options.coordinator_flags.push_back(f);
  }
  options.trainer_flags = {
      absl::StrCat("--sizes=", absl::GetFlag(FLAGS_sizes)),
      absl::StrCat("--timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_collective_timeout))),
      "--deadline=24h", "--reconnect_timeout=1h"};
  trainer_flags.insert(trainer_flags.begin(), options.trainer_flags.begin(),
                       options.trainer_flags.end());
  options.trainer_flags = std::move(trainer_flags);
  absl::StatusOr<std::unique_ptr<ChaosJob>> job = ChaosJob::Start(options);
  if (!job.ok()) return job.status();
  if (absl::Status s = (*job)->StartTrainers(); !s.ok()) return s;
  return job;
}

// The first call of trainer `i` at or after `since_us` matching `pred`, if logged yet.
template <typename Pred>
const CallOutcome* FirstCallAfter(ChaosJob& job, int i, int64_t since_us, Pred pred) {
  for (const CallOutcome& call : job.Log(i).calls) {
    if (call.t_us >= since_us && pred(call)) return &call;
  }
  return nullptr;
}

// Waits until every trainer in `ranks` has an OK step returned after `since_us` in a ring
// of `world` ranks (0: any); the latest of those times, or nullopt at the timeout.
std::optional<int64_t> AwaitOkEverywhere(ChaosJob& job, const std::vector<int>& ranks,
                                         int64_t since_us, int world, absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  while (!deadline.Passed()) {
    int64_t latest = 0;
    bool all = true;
    for (int i : ranks) {
      const CallOutcome* ok = FirstCallAfter(job, i, since_us, [&](const CallOutcome& c) {
        return c.ok && absl::StartsWith(c.name, "step/") && (world == 0 || c.world == world);
      });
      if (ok == nullptr) {
        all = false;
        break;
      }
      latest = std::max(latest, ok->t_us);
    }
    if (all) return latest;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return std::nullopt;
}

// The first failure any trainer in `ranks` saw after `since_us` (the ring's detection).
std::optional<int64_t> FirstFailure(ChaosJob& job, const std::vector<int>& ranks, int64_t since_us) {
  std::optional<int64_t> first;
  for (int i : ranks) {
    const CallOutcome* failed =
        FirstCallAfter(job, i, since_us, [](const CallOutcome& c) { return !c.ok; });
    if (failed != nullptr && (!first || failed->t_us < *first)) first = failed->t_us;
  }
  return first;
}

int Reform() {
  const int n = absl::GetFlag(FLAGS_world_size);
  const bool elastic = absl::GetFlag(FLAGS_elastic);
  absl::StatusOr<std::unique_ptr<ChaosJob>> started = StartJob({"--steps=1000000000"});
  if (!started.ok()) {
    Say(absl::StrCat("cannot start the job: ", started.status().ToString()));
    return 1;
  }
  ChaosJob& job = **started;
  std::vector<int> everyone;
  for (int i = 0; i < n; ++i) everyone.push_back(i);
  if (!AwaitOkEverywhere(job, everyone, 0, n, absl::Seconds(60))) {
    Say("the job never ran\n" + job.Diagnostics());
    return 1;
  }
  std::vector<double> loss_ms, loss_detect_ms, restart_ms, restart_detect_ms;
  for (int trial = 0; trial < absl::GetFlag(FLAGS_trials); ++trial) {
    const int victim = 1 + trial % (n - 1);
    std::vector<int> survivors;
    for (int i : everyone) {
      if (i != victim) survivors.push_back(i);
    }
    absl::SleepFor(absl::Milliseconds(200));  // steady state between trials
    const int64_t kill_us = absl::ToUnixMicros(absl::Now());
    job.cluster().worker(victim).Signal(SIGKILL);
    std::string line = absl::StrCat("trial ", trial, " victim w", victim);
    if (elastic) {
      std::optional<int64_t> ok = AwaitOkEverywhere(job, survivors, kill_us, n - 1, absl::Seconds(60));
      if (!ok) {
        Say(line + ": the survivors never re-formed\n" + job.Diagnostics());
        return 1;
      }
      const std::optional<int64_t> detected = FirstFailure(job, survivors, kill_us);
      loss_ms.push_back(static_cast<double>(*ok - kill_us) / 1000);
      absl::StrAppend(&line, absl::StrFormat(" loss: kill->ok %.0f ms", loss_ms.back()));
      if (detected) {
        loss_detect_ms.push_back(static_cast<double>(*ok - *detected) / 1000);
        absl::StrAppend(&line, absl::StrFormat(", detection->ok %.0f ms", loss_detect_ms.back()));
      }
    }
    const int64_t restart_us = absl::ToUnixMicros(absl::Now());
    if (absl::Status s = job.cluster().RestartWorker(victim); !s.ok()) {
      Say(line + ": restart failed: " + s.ToString());
      return 1;
    }
    std::optional<int64_t> back = AwaitOkEverywhere(job, everyone, restart_us, n, absl::Seconds(60));
    if (!back) {
      Say(line + ": the ring never ran on all ranks again\n" + job.Diagnostics());
      return 1;
    }
    restart_ms.push_back(static_cast<double>(*back - (elastic ? restart_us : kill_us)) / 1000);
    absl::StrAppend(&line, absl::StrFormat(" restart: %s->ok %.0f ms", elastic ? "restart" : "kill",
                                           restart_ms.back()));
    if (!elastic) {
      if (std::optional<int64_t> detected = FirstFailure(job, survivors, kill_us)) {
        restart_detect_ms.push_back(static_cast<double>(*back - *detected) / 1000);
        absl::StrAppend(&line, absl::StrFormat(", detection->ok %.0f ms", restart_detect_ms.back()));
      }
    }
    Say(line);
    if (restart_ms.back() > 2000) {
      // What the ranks were told meanwhile: why this trial was slow.
      for (const std::string& connected : job.Log(victim).connect_lines) {
        Say(absl::StrFormat("  slow trial: trainer %d %s", victim, connected));
      }
      for (int i : everyone) {
        for (const CallOutcome& call : job.Log(i).calls) {
          if (!call.ok && call.t_us >= kill_us && call.t_us <= *back) {
            Say(absl::StrFormat("  slow trial: trainer %d call %d '%s' failed after %.0f ms: %s", i,
                                call.k, call.name, call.ms, call.message));
          }
        }
      }
    }
  }
  const Verdict verdict = CheckOutcomes(job.Logs());
  Say(absl::StrCat("N=", n, elastic ? ", elastic" : ", fixed size", ", lease ",
                   absl::FormatDuration(absl::GetFlag(FLAGS_lease))));
  if (elastic) {
    Say(Stats("re-form after a worker loss, kill -> first OK on every survivor", loss_ms));
    Say(Stats("re-form after a worker loss, detection -> first OK", loss_detect_ms));
    Say(Stats("after the worker's restart, restart -> first OK on all N", restart_ms));
  } else {
    Say(Stats("worker killed and restarted at once, kill -> first OK on every rank", restart_ms));
    Say(Stats("worker killed and restarted at once, detection -> first OK", restart_detect_ms));
  }
  Say(verdict.Summary());
  return verdict.wrong == 0 && verdict.partial == 0 ? 0 : 1;
}

struct ProcessUsage {
  int64_t rss_kib = -1;
  int fds = -1;
};

ProcessUsage UsageOf(pid_t pid) {
  ProcessUsage usage;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2) absl::SimpleAtoi(parts[1], &usage.rss_kib);
    }
  }
  std::error_code error;
  usage.fds = 0;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++usage.fds;
  }
  return usage;
}

std::string UsageLine(ChaosJob& job, const std::string& when) {
  std::string line = absl::StrCat("workers at ", when, ":");
  for (int i = 0; i < job.world_size(); ++i) {
    const ProcessUsage u = UsageOf(job.cluster().worker(i).pid());
    absl::StrAppend(&line, absl::StrFormat(" w%d(pid %d) RSS %.1f MiB fds %d;", i,
                                           job.cluster().worker(i).pid(),
                                           static_cast<double>(u.rss_kib) / 1024, u.fds));
  }
  return line;
}

// One fault of the soak's rotation; returns what it did.
std::string InjectFault(ChaosJob& job, int64_t number) {
  const int n = job.world_size();
  // Worker 0 is only ever frozen, never killed: its RSS and fds span the whole soak.
  const int victim = 1 + static_cast<int>(number % (n - 1));
  const absl::Duration lease = absl::GetFlag(FLAGS_lease);
  switch (number % 4) {
    case 0: {
      // Elastic: the survivors train on without it for a second (N -> N-1 -> N).
      const absl::Duration away =
          absl::GetFlag(FLAGS_elastic) ? absl::Seconds(1) : absl::Milliseconds(100);
      job.cluster().worker(victim).Signal(SIGKILL);
      absl::SleepFor(away);
      absl::Status s = job.cluster().RestartWorker(victim);
      return absl::StrCat("SIGKILL w", victim, ", restart after ", absl::FormatDuration(away),
                          s.ok() ? "" : ": " + s.ToString());
    }
    case 1: {
      const int frozen = static_cast<int>(number / 4 % n);
      job.cluster().worker(frozen).Signal(SIGSTOP);
      absl::SleepFor(lease / 2);
      job.cluster().worker(frozen).Signal(SIGCONT);
      return absl::StrCat("SIGSTOP w", frozen, " for half the lease");
    }
    case 2: {
      job.cluster().worker(victim).Signal(SIGSTOP);
      absl::SleepFor(lease * 2.5);
      job.cluster().worker(victim).Signal(SIGCONT);
      return absl::StrCat("SIGSTOP w", victim, " for 2.5 leases");
    }
    default: {
      job.cluster().coordinator().Signal(SIGKILL);
      absl::SleepFor(absl::Milliseconds(500));
      absl::Status s = job.cluster().RestartCoordinator();
      return absl::StrCat("SIGKILL coordinator + restart", s.ok() ? "" : ": " + s.ToString());
    }
  }
}

int Soak() {
  const int64_t total = absl::GetFlag(FLAGS_collectives);
  const int64_t every = std::max<int64_t>(1, absl::GetFlag(FLAGS_fault_every));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ChaosJob>> started = StartJob({absl::StrCat("--steps=", total)});
  if (!started.ok()) {
    Say(absl::StrCat("cannot start the job: ", started.status().ToString()));
    return 1;
  }
  ChaosJob& job = **started;
  const int n = job.world_size();
  if (!job.AwaitOkStepsEverywhere(std::min<int64_t>(50, total), absl::Seconds(60))) {
    Say("the job never ran\n" + job.Diagnostics());
    return 1;
  }
  Say(UsageLine(job, "start (after 50 collectives)"));
  int64_t faults = 0;
  bool hung = false;
  int64_t last_progress = -1;
  absl::Time last_progress_at = absl::Now();
  while (true) {
    int64_t least = total;
    bool all_done = true;
    for (int i = 0; i < n; ++i) {
      const TrainerLog& log = job.Log(i);
      least = std::min(least, log.ok_steps);
      all_done = all_done && log.done;
    }
    if (all_done) break;
    if (least != last_progress) {
      last_progress = least;
      last_progress_at = absl::Now();
    } else if (absl::Now() - last_progress_at > absl::GetFlag(FLAGS_stall_limit)) {
      Say(absl::StrCat("HUNG: no rank progressed for ", absl::FormatDuration(absl::GetFlag(FLAGS_stall_limit)),
                       " at ", least, " collectives\n", job.Diagnostics()));
      hung = true;
      break;
    }
    if (least >= (faults + 1) * every && least < total) {
      const std::string what = InjectFault(job, faults++);
      Say(absl::StrCat("fault ", faults, " at ", least, " collectives (",
                       absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1))),
                       "): ", what));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  Say(UsageLine(job, "end"));
  const std::vector<pid_t> trainer_pids = job.TrainerPids();
  const std::vector<int> codes = job.AwaitTrainers(SteadyDeadline(absl::Seconds(hung ? 1 : 60)));
  const Verdict verdict = CheckOutcomes(job.Logs());
  const absl::Duration hang_limit = absl::GetFlag(FLAGS_collective_timeout) + absl::Seconds(2);
  int64_t overdue = 0;  // collectives that returned past their deadline (+2 s)
  for (const TrainerLog& log : job.Logs()) {
    for (const CallOutcome& call : log.calls) {
      overdue += call.ms > absl::ToDoubleMilliseconds(hang_limit);
    }
  }
  int unfinished = 0;
  for (int code : codes) unfinished += code != 0;
  started->reset();  // stops every daemon
  const std::vector<std::string> shm = SharedMemoryFilesOf(trainer_pids);
  Say(absl::StrCat("soak: N=", n, ", ", total, " collectives per rank, sizes ",
                   absl::GetFlag(FLAGS_sizes), " x int64, ", faults, " faults (one every ", every,
                   "), ", absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1)))));
  Say(absl::StrCat("wrong ", verdict.wrong, ", partial ", verdict.partial, ", hung ",
                   (hung ? 1 : 0) + unfinished, " (trainers unfinished ", unfinished,
                   "), collectives past their deadline + 2 s ", overdue,
                   ", unnamed failures ", verdict.unnamed_failures));
  Say(absl::StrCat("/dev/shm files of the trainers left: ", shm.size()));
  Say(verdict.Summary());
  return verdict.wrong == 0 && verdict.partial == 0 && !hung && unfinished == 0 && shm.empty() ? 0 : 1;
}

}  // namespace
}  // namespace ringsync::chaos

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "reform") return ringsync::chaos::Reform();
  if (mode == "soak") return ringsync::chaos::Soak();
  std::fprintf(stderr, "--mode is reform or soak\n");
  return 1;
}
