#include "tools/cluster/local_cluster.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ringsync {
namespace {

// Waits for a port file a daemon writes once it serves; returns its line.
absl::StatusOr<std::string> AwaitPortFile(const std::string& path, ChildProcess& process,
                                          absl::Time deadline, const std::string& what) {
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) return line;
    if (!process.running()) {
      return absl::UnavailableError(absl::StrCat(what, " exited during start-up"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(what, " did not start in time"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.world_size < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  char pattern[] = "/tmp/ringsync-cluster-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  cluster->directory_ = pattern;
  const absl::Time deadline = absl::Now() + options.startup_timeout;

  const std::string port_file = cluster->directory_ + "/coordinator.port";
  std::vector<std::string> argv = {options.ringsyncd, "coordinator", "--listen=127.0.0.1:0",
                                   absl::StrCat("--world_size=", options.world_size),
                                   "--port_file=" + port_file};
  const std::vector<std::string> http_flags = cluster->HttpFlags("coordinator");
  argv.insert(argv.end(), http_flags.begin(), http_flags.end());
  argv.insert(argv.end(), options.coordinator_flags.begin(), options.coordinator_flags.end());
  absl::StatusOr<ChildProcess> coordinator =
      ChildProcess::Start(argv, cluster->directory_ + "/coordinator.log");
  if (!coordinator.ok()) return coordinator.status();
  cluster->coordinator_ = *std::move(coordinator);
  absl::StatusOr<std::string> address =
      AwaitPortFile(port_file, cluster->coordinator_, deadline, "the coordinator");
  if (!address.ok()) {
    return absl::Status(address.status().code(), absl::StrCat(address.status().message(), ":\n",
                                                              cluster->Log("coordinator")));
  }
  cluster->coordinator_address_ = *address;
  if (options.http) {
    // Written before the gRPC port file: already there.
    absl::StatusOr<std::string> http = AwaitPortFile(cluster->directory_ + "/coordinator.http",
                                                     cluster->coordinator_, deadline,
                                                     "the coordinator's HTTP endpoint");
    if (!http.ok()) return http.status();
    cluster->coordinator_http_ = *http;
  }

  cluster->workers_.resize(options.world_size);
  cluster->worker_http_.resize(options.world_size);
  for (int i = 0; i < options.world_size; ++i) {
    if (absl::Status s = cluster->StartWorker(i); !s.ok()) return s;
  }
  for (int i = 0; i < options.world_size; ++i) {
    if (absl::Status s = cluster->AwaitWorker(i, deadline); !s.ok()) return s;
  }
  return cluster;
}

std::vector<std::string> LocalCluster::HttpFlags(const std::string& name) const {
  if (!options_.http) return {};
  return {"--http_listen=127.0.0.1:0", "--http_port_file=" + directory_ + "/" + name + ".http"};
}

absl::Status LocalCluster::AwaitWorker(int i, absl::Time deadline) {
  const std::string id = worker_id(i);
  absl::StatusOr<std::string> peer =
      AwaitPortFile(directory_ + "/" + id + ".port", workers_[i], deadline, absl::StrCat("worker ", id));
  if (!peer.ok()) {
    return absl::Status(peer.status().code(), absl::StrCat(peer.status().message(), ":\n", Log(id)));
  }
  if (options_.http) {
    // The worker writes it before joining, so before its peer port file.
    absl::StatusOr<std::string> http = AwaitPortFile(directory_ + "/" + id + ".http", workers_[i],
                                                     deadline, absl::StrCat("worker ", id, " HTTP"));
    if (!http.ok()) return http.status();
    worker_http_[i] = *http;
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartWorker(int i) {
  const std::string id = worker_id(i);
  ::unlink((directory_ + "/" + id + ".port").c_str());
  ::unlink((directory_ + "/" + id + ".http").c_str());
  std::vector<std::string> argv = {options_.ringsyncd,
                                   "worker",
                                   "--coordinator=" + coordinator_address_,
                                   "--worker_id=" + id,
                                   "--peer_listen=127.0.0.1:0",
                                   "--socket=" + directory_ + "/" + id + ".sock",
                                   "--port_file=" + directory_ + "/" + id + ".port"};
  const std::vector<std::string> http_flags = HttpFlags(id);
  argv.insert(argv.end(), http_flags.begin(), http_flags.end());
  argv.insert(argv.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  absl::StatusOr<ChildProcess> worker = ChildProcess::Start(argv, directory_ + "/" + id + ".log");
  if (!worker.ok()) return worker.status();
  workers_[i] = *std::move(worker);
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartWorker(int i) {
  workers_[i].Stop();
  if (absl::Status s = StartWorker(i); !s.ok()) return s;
  return AwaitWorker(i, absl::Now() + options_.startup_timeout);
}

LocalCluster::~LocalCluster() {
  for (auto& other : others_) other->Stop();
  for (ChildProcess& worker : workers_) worker.Stop();
  coordinator_.Stop();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string LocalCluster::worker_id(int i) const {
  const int width = static_cast<int>(absl::StrCat(std::max(0, world_size() - 1)).size());
  return absl::StrFormat("w%0*d", width, i);
}

std::string LocalCluster::worker_target(int i) const {
  return absl::StrCat("unix:", directory_, "/", worker_id(i), ".sock");
}

std::string LocalCluster::Log(const std::string& name) const {
  return ReadFile(directory_ + "/" + name + ".log");
}

absl::StatusOr<ChildProcess*> LocalCluster::Spawn(const std::string& name,
                                                  const std::vector<std::string>& argv) {
  absl::StatusOr<ChildProcess> process = ChildProcess::Start(argv, directory_ + "/" + name + ".log");
  if (!process.ok()) return process.status();
  others_.push_back(std::make_unique<ChildProcess>(*std::move(process)));
  return others_.back().get();
}

}  // namespace ringsync
