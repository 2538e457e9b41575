// LocalCluster: a ringsync cluster of real processes on this machine — one
// `ringsyncd coordinator` and N `ringsyncd worker`s on 127.0.0.1 ephemeral ports, each
// worker serving its training process on a unix socket in a private directory. Used by
// the demo and the integration tests; everything it starts stops with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"

namespace ringsync {

struct LocalClusterOptions {
  int world_size = 4;
  std::string ringsyncd;                        // path of the ringsyncd binary
  std::vector<std::string> coordinator_flags;   // extra flags, e.g. "--heartbeat_timeout=2s"
  std::vector<std::string> worker_flags;        // extra flags for every worker
  absl::Duration startup_timeout = absl::Seconds(30);
  // Serve /metrics, /healthz, /readyz on every daemon (--http_listen=127.0.0.1:0); the
  // bound addresses are coordinator_http_address() and worker_http_address(i).
  bool http = false;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();  // stops every process and removes the directory

  int world_size() const { return static_cast<int>(workers_.size()); }
  const std::string& coordinator_address() const { return coordinator_address_; }
  // HOST:PORT of the HTTP endpoints; empty unless options.http.
  const std::string& coordinator_http_address() const { return coordinator_http_; }
  const std::string& worker_http_address(int i) const { return worker_http_[i]; }
  // Worker i becomes rank i: ids sort in index order ("w0".."w3", zero-padded).
  std::string worker_id(int i) const;
  // The SDK target of worker i, "unix:/.../wI.sock".
  std::string worker_target(int i) const;
  ChildProcess& worker(int i) { return workers_[i]; }
  ChildProcess& coordinator() { return coordinator_; }
  const std::string& directory() const { return directory_; }
  // Everything a process wrote, for diagnostics: "coordinator" or "w0" ...
  std::string Log(const std::string& name) const;

  // Starts another program whose output goes to DIRECTORY/NAME.log; stopped with the cluster.
  absl::StatusOr<ChildProcess*> Spawn(const std::string& name, const std::vector<std::string>& argv);

  // Restarts worker i with the same id and socket (after it was killed).
  absl::Status RestartWorker(int i);

 private:
  LocalCluster() = default;
  absl::Status StartWorker(int i);
  // Waits for worker i's port files (and HTTP port file) after StartWorker.
  absl::Status AwaitWorker(int i, absl::Time deadline);
  // The flags that make a daemon serve HTTP and write its port to DIRECTORY/NAME.http.
  std::vector<std::string> HttpFlags(const std::string& name) const;

  LocalClusterOptions options_;
  std::string directory_;
  std::string coordinator_address_;
  std::string coordinator_http_;
  std::vector<std::string> worker_http_;
  ChildProcess coordinator_;
  std::vector<ChildProcess> workers_;
  std::vector<std::unique_ptr<ChildProcess>> others_;
};

}  // namespace ringsync
