#include "tools/cluster/local_cluster.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace ringsync {
namespace {

// Waits for a port file a daemon writes once it serves; returns its line.
absl::StatusOr<std::string> AwaitPortFile(const std::string& path, ChildProcess& process,
                                          const SteadyDeadline& deadline,
                                          const std::string& what) {
  while (!deadline.Passed()) {
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

// 32 random bytes as hex, written to a new file only its owner can read.
absl::StatusOr<std::string> WriteRandomToken(const std::string& path) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::string bytes(32, '\0');
  if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return absl::InternalError("cannot read /dev/urandom for the cluster token");
  }
  const std::string token = absl::BytesToHexString(bytes);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", path));
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", path));
  return token;
}

}  // namespace

std::vector<std::string> ClusterCredentials::Flags() const {
  std::vector<std::string> flags;
  if (!token_file.empty()) flags.push_back("--token_file=" + token_file);
  if (!tls_ca.empty()) {
    flags.push_back("--tls_ca=" + tls_ca);
    flags.push_back("--tls_cert=" + tls_cert);
    flags.push_back("--tls_key=" + tls_key);
  }
  return flags;
}

absl::Status LocalCluster::MakeSecrets() {
  if (options_.security == ClusterSecurity::kInsecure) return absl::OkStatus();
  const std::string token_file = directory_ + "/cluster.token";
  absl::StatusOr<std::string> token = WriteRandomToken(token_file);
  if (!token.ok()) return token.status();
  http_token_ = *token;
  client_.token_file = token_file;
  if (options_.security == ClusterSecurity::kToken) return absl::OkStatus();
  // With mutual TLS the token guards only the HTTP ports: gRPC callers present certificates.
  client_.token_file.clear();
  std::vector<std::string> names = {"coordinator", "client/sdk"};
  for (int i = 0; i < options_.world_size; ++i) names.push_back("worker/" + worker_id(i));
  if (absl::Status s = MakeCertificates(names); !s.ok()) return s;
  client_.tls_ca = tls_file("ca.pem");
  client_.tls_cert = tls_file("client-sdk.pem");
  client_.tls_key = tls_file("client-sdk.key");
  return absl::OkStatus();
}

absl::Status LocalCluster::MakeCertificates(const std::vector<std::string>& names) {
  if (options_.make_certs.empty()) {
    return absl::InvalidArgumentError("mutual TLS needs LocalClusterOptions::make_certs");
  }
  const std::string command = absl::StrCat(options_.make_certs, " ", directory_, "/tls ",
                                           absl::StrJoin(names, " "), " >", directory_,
                                           "/make-certs.log 2>&1");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("making certificates failed: ", command, ":\n",
                                            ReadFile(directory_ + "/make-certs.log")));
  }
  return absl::OkStatus();
}

std::vector<std::string> LocalCluster::SecurityFlags(const std::string& name) const {
  switch (options_.security) {
    case ClusterSecurity::kInsecure:
      return {"--insecure"};
    case ClusterSecurity::kToken:
      return {"--token_file=" + directory_ + "/cluster.token"};
    case ClusterSecurity::kMutualTls: {
      const std::string file = name == "coordinator" ? name : "worker-" + name;
      return {"--tls_ca=" + tls_file("ca.pem"), "--tls_cert=" + tls_file(file + ".pem"),
              "--tls_key=" + tls_file(file + ".key"),
              "--http_token_file=" + directory_ + "/cluster.token"};
    }
  }
  return {};
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.world_size < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  char pattern[] = "/tmp/ringsync-cluster-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  cluster->directory_ = pattern;
  cluster->workers_.resize(options.world_size);  // worker_id() needs the world size
  if (absl::Status s = cluster->MakeSecrets(); !s.ok()) return s;
  const SteadyDeadline deadline(options.startup_timeout);

  if (absl::Status s = cluster->StartCoordinator("127.0.0.1:0", deadline); !s.ok()) return s;

  cluster->workers_.resize(options.world_size);
  cluster->worker_http_.resize(options.world_size);
  const int started = options.started_workers < 0
                          ? options.world_size
                          : std::min(options.started_workers, options.world_size);
  for (int i = 0; i < started; ++i) {
    if (absl::Status s = cluster->StartWorker(i); !s.ok()) return s;
  }
  for (int i = 0; i < started; ++i) {
    if (absl::Status s = cluster->AwaitWorker(i, deadline); !s.ok()) return s;
  }
  return cluster;
}

absl::Status LocalCluster::StartCoordinator(const std::string& listen,
                                            const SteadyDeadline& deadline) {
  const std::string port_file = directory_ + "/coordinator.port";
  ::unlink(port_file.c_str());
  std::vector<std::string> argv = {options_.ringsyncd, "coordinator", "--listen=" + listen,
                                   "--port_file=" + port_file};
  if (options_.min_world_size > 0) {
    argv.push_back(absl::StrCat("--min_world_size=", options_.min_world_size));
    argv.push_back(absl::StrCat("--max_world_size=", options_.world_size));
  } else {
    argv.push_back(absl::StrCat("--world_size=", options_.world_size));
  }
  const std::vector<std::string> http_flags = HttpFlags("coordinator");
  argv.insert(argv.end(), http_flags.begin(), http_flags.end());
  const std::vector<std::string> security_flags = SecurityFlags("coordinator");
  argv.insert(argv.end(), security_flags.begin(), security_flags.end());
  argv.insert(argv.end(), options_.coordinator_flags.begin(), options_.coordinator_flags.end());
  absl::StatusOr<ChildProcess> coordinator =
      ChildProcess::Start(argv, directory_ + "/coordinator.log");
  if (!coordinator.ok()) return coordinator.status();
  coordinator_ = *std::move(coordinator);
  absl::StatusOr<std::string> address =
      AwaitPortFile(port_file, coordinator_, deadline, "the coordinator");
  if (!address.ok()) {
    return absl::Status(address.status().code(),
                        absl::StrCat(address.status().message(), ":\n", Log("coordinator")));
  }
  coordinator_address_ = *address;
  if (options_.http) {
    // Written before the gRPC port file: already there.
    absl::StatusOr<std::string> http = AwaitPortFile(directory_ + "/coordinator.http",
                                                     coordinator_, deadline,
                                                     "the coordinator's HTTP endpoint");
    if (!http.ok()) return http.status();
    coordinator_http_ = *http;
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartCoordinator() {
  coordinator_.Stop();
  ::unlink((directory_ + "/coordinator.http").c_str());
  // The same address, which every worker keeps reconnecting to.
  return StartCoordinator(coordinator_address_, SteadyDeadline(options_.startup_timeout));
}

std::vector<std::string> LocalCluster::HttpFlags(const std::string& name) const {
  if (!options_.http) return {};
  return {"--http_listen=127.0.0.1:0", "--http_port_file=" + directory_ + "/" + name + ".http"};
}

absl::Status LocalCluster::AwaitWorker(int i, const SteadyDeadline& deadline) {
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

std::vector<std::string> LocalCluster::WorkerArgv(int i, const std::string& name) const {
  std::vector<std::string> argv = {options_.ringsyncd,
                                   "worker",
                                   "--coordinator=" + coordinator_address_,
                                   "--worker_id=" + worker_id(i),
                                   "--peer_listen=127.0.0.1:0",
                                   "--socket=" + directory_ + "/" + name + ".sock",
                                   "--port_file=" + directory_ + "/" + name + ".port"};
  const std::vector<std::string> http_flags = HttpFlags(name);
  argv.insert(argv.end(), http_flags.begin(), http_flags.end());
  const std::vector<std::string> security_flags = SecurityFlags(worker_id(i));
  argv.insert(argv.end(), security_flags.begin(), security_flags.end());
  argv.insert(argv.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  if (auto own = options_.worker_flags_of.find(i); own != options_.worker_flags_of.end()) {
    argv.insert(argv.end(), own->second.begin(), own->second.end());
  }
  if (auto launcher = options_.worker_launcher_of.find(i);
      launcher != options_.worker_launcher_of.end()) {
    argv.insert(argv.begin(), launcher->second.begin(), launcher->second.end());
  }
  return argv;
}

absl::Status LocalCluster::StartWorker(int i) {
  const std::string id = worker_id(i);
  ::unlink((directory_ + "/" + id + ".port").c_str());
  ::unlink((directory_ + "/" + id + ".http").c_str());
  absl::StatusOr<ChildProcess> worker = ChildProcess::Start(WorkerArgv(i, id), directory_ + "/" + id + ".log");
  if (!worker.ok()) return worker.status();
  workers_[i] = *std::move(worker);
  return absl::OkStatus();
}

absl::StatusOr<ChildProcess*> LocalCluster::SpawnWorkerTwin(int i) {
  const std::string name = worker_id(i) + "-twin";
  return Spawn(name, WorkerArgv(i, name));
}

bool LocalCluster::CoordinatorIsElastic(const std::string& ringsyncd) {
  FILE* help = ::popen((ringsyncd + " coordinator --help 2>&1").c_str(), "r");
  if (help == nullptr) return false;
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), help)) > 0;) text.append(buffer, n);
  ::pclose(help);
  return absl::StrContains(text, "min_world_size");
}

absl::Status LocalCluster::RestartWorker(int i) {
  workers_[i].Stop();
  if (absl::Status s = StartWorker(i); !s.ok()) return s;
  return AwaitWorker(i, SteadyDeadline(options_.startup_timeout));
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
