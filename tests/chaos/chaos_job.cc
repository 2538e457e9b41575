#include "tests/chaos/chaos_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/http_get.h"

namespace ringsync::chaos {
namespace {

std::string Tail(const std::string& text, size_t lines) {
  size_t pos = text.size();
  for (size_t n = 0; n <= lines && pos != std::string::npos && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos ? text : text.substr(pos + 1);
}


}  // namespace

absl::StatusOr<std::unique_ptr<ChaosJob>> ChaosJob::Start(const ChaosJobOptions& options) {
  std::unique_ptr<ChaosJob> job(new ChaosJob());
  job->options_ = options;
  LocalClusterOptions cluster;
  cluster.world_size = options.world_size;
  cluster.min_world_size = options.min_world_size;
  cluster.started_workers = options.started_workers;
  cluster.ringsyncd = options.ringsyncd;
  cluster.make_certs = options.make_certs;
  cluster.security = options.security;
  cluster.http = true;
  cluster.worker_flags = options.worker_flags;
  cluster.coordinator_flags = options.coordinator_flags;
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(cluster);
  if (!started.ok()) return started.status();
  job->cluster_ = *std::move(started);
  return job;
}

absl::Status ChaosJob::StartTrainer(int i, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {options_.trainer, "--worker=" + cluster_->worker_target(i),
                                   absl::StrCat("--index=", i)};
  argv.insert(argv.end(), options_.trainer_flags.begin(), options_.trainer_flags.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::string name = absl::StrCat("trainer", i);
  absl::StatusOr<ChildProcess*> process = cluster_->Spawn(name, argv);
  if (!process.ok()) return process.status();
  auto trainer = std::make_unique<Trainer>();
  trainer->slot = i;
  trainer->process = *process;
  trainer->path = cluster_->directory() + "/" + name + ".log";
  trainer->log.trainer = i;
  trainers_.push_back(std::move(trainer));
  return absl::OkStatus();
}

absl::Status ChaosJob::StartTrainers() {
  for (int i = 0; i < world_size(); ++i) {
    if (absl::Status s = StartTrainer(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool ChaosJob::AwaitOkSteps(int i, int n, absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  while (Log(i).ok_steps < n) {
    if (deadline.Passed()) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

bool ChaosJob::AwaitOkStepsEverywhere(int n, absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  for (const auto& trainer : trainers_) {
    if (!AwaitOkSteps(trainer->slot, n, deadline.Left())) return false;
  }
  return true;
}

std::vector<int> ChaosJob::AwaitTrainers(const SteadyDeadline& deadline) {
  std::vector<int> codes;
  for (const auto& trainer : trainers_) {
    ChildProcess& process = *trainer->process;
    absl::StatusOr<int> code = process.Wait(deadline.Left());
    if (!code.ok()) process.Stop(absl::ZeroDuration());
    codes.push_back(code.ok() ? *code : -1);
  }
  return codes;
}

ChaosJob::Trainer* ChaosJob::FindTrainer(int slot) {
  for (const auto& trainer : trainers_) {
    if (trainer->slot == slot) return trainer.get();
  }
  return nullptr;
}

const TrainerLog& ChaosJob::Log(int i) {
  static const TrainerLog kNone;
  Trainer* trainer = FindTrainer(i);
  if (trainer == nullptr) return kNone;
  std::ifstream in(trainer->path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(trainer->offset));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t end = text.rfind('\n');  // whole lines only; the rest is read next time
  if (end != std::string::npos) {
    AppendTrainerLines(trainer->log, absl::string_view(text).substr(0, end + 1));
    trainer->offset += end + 1;
  }
  return trainer->log;
}

std::vector<TrainerLog> ChaosJob::Logs() {
  std::vector<TrainerLog> logs;
  for (const auto& trainer : trainers_) logs.push_back(Log(trainer->slot));
  return logs;
}

std::vector<pid_t> ChaosJob::TrainerPids() const {
  std::vector<pid_t> pids;
  for (const auto& trainer : trainers_) pids.push_back(trainer->process->pid());
  return pids;
}

std::string ChaosJob::Diagnostics() const {
  std::string text;
  std::vector<std::string> names = {"coordinator"};
  for (int i = 0; i < cluster_->world_size(); ++i) names.push_back(cluster_->worker_id(i));
  for (const auto& trainer : trainers_) names.push_back(absl::StrCat("trainer", trainer->slot));
  for (const std::string& name : names) {
    absl::StrAppend(&text, "--- ", name, " (last lines)\n", Tail(cluster_->Log(name), 15), "\n");
  }
  return text;
}

absl::StatusOr<double> ChaosJob::WorkerMetric(int i, absl::string_view family,
                                              absl::string_view labels) const {
  return Metric(cluster_->worker_http_address(i), family, labels);
}

absl::StatusOr<double> ChaosJob::CoordinatorMetric(absl::string_view family,
                                                   absl::string_view labels) const {
  return Metric(cluster_->coordinator_http_address(), family, labels);
}

absl::StatusOr<double> ChaosJob::Metric(const std::string& address, absl::string_view family,
                                        absl::string_view labels) const {
  const testing::HttpReply reply = testing::HttpGet(address, "/metrics", cluster_->http_token());
  if (reply.status != 200) {
    return absl::UnavailableError(absl::StrCat("cannot read http://", address, "/metrics"));
  }
  return SumMetric(reply.body, family, labels);
}

std::vector<std::string> SharedMemoryFilesOf(const std::vector<pid_t>& pids) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/dev/shm", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    for (pid_t pid : pids) {
      if (absl::StartsWith(name, absl::StrCat("ringsync-", pid, "-"))) files.push_back(name);
    }
  }
  return files;
}

}  // namespace ringsync::chaos
