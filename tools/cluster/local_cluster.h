// LocalCluster: a ringsync cluster of real processes on this machine — one
// `ringsyncd coordinator` and N `ringsyncd worker`s on 127.0.0.1 ephemeral ports, each
// worker serving its training process on a unix socket in a private directory. Used by
// the demo and the integration tests; everything it starts stops with it.
//
// Secure by default: the daemons authenticate with a random cluster token written to
// the cluster's private directory (0700, the file 0600), or with mutual TLS from a CA
// and certificates made there by deploy/make-certs.sh. Nothing is needed by hand.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "tools/cluster/child_process.h"

namespace ringsync {

// How the cluster's daemons authenticate each other and their callers.
enum class ClusterSecurity {
  kToken,      // a random cluster token (--token_file)
  kMutualTls,  // certificates per daemon (--tls_*), plus the token for the HTTP ports
  kInsecure,   // --insecure
};

struct LocalClusterOptions {
  int world_size = 4;
  // An elastic ring: the coordinator gets --min_world_size=min_world_size and
  // --max_world_size=world_size instead of --world_size. 0: a fixed-size ring.
  int min_world_size = 0;
  // Workers started by Start (the first ones); the others start with RestartWorker, e.g.
  // to scale an elastic ring up. -1: all.
  int started_workers = -1;
  std::string ringsyncd;                        // path of the ringsyncd binary
  std::vector<std::string> coordinator_flags;   // extra flags, e.g. "--heartbeat_timeout=2s"
  std::vector<std::string> worker_flags;        // extra flags for every worker
  std::map<int, std::vector<std::string>> worker_flags_of;  // and for worker i only
  // A command worker i runs under, e.g. {"/usr/bin/unshare", "--pid", "--fork",
  // "--kill-child=SIGTERM"} for a pid namespace of its own (as a container has).
  std::map<int, std::vector<std::string>> worker_launcher_of;
  absl::Duration startup_timeout = absl::Seconds(30);
  // Serve /metrics, /healthz, /readyz on every daemon (--http_listen=127.0.0.1:0); the
  // bound addresses are coordinator_http_address() and worker_http_address(i).
  bool http = false;
  ClusterSecurity security = ClusterSecurity::kToken;
  // deploy/make-certs.sh; required for ClusterSecurity::kMutualTls.
  std::string make_certs;
};

// What a client of the cluster's TCP ports presents (all empty when insecure).
struct ClusterCredentials {
  std::string token_file;  // the cluster token (also the HTTP bearer token)
  std::string tls_ca, tls_cert, tls_key;  // a client certificate, with kMutualTls
  // As flags of ringsyncctl and ringsync-bench ("--token_file=...", "--tls_ca=...").
  std::vector<std::string> Flags() const;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  // Whether `ringsyncd`'s coordinator re-forms a ring with fewer workers, i.e. has
  // --min_world_size (LocalClusterOptions::min_world_size needs it).
  static bool CoordinatorIsElastic(const std::string& ringsyncd);
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
  // What a client presents to the daemons' TCP ports (a client certificate with mTLS).
  const ClusterCredentials& client_credentials() const { return client_; }
  // The HTTP ports' bearer token; empty when insecure.
  const std::string& http_token() const { return http_token_; }
  // Makes certificates under the cluster's CA (deploy/make-certs.sh NAMES): e.g. a
  // rogue's "worker/w9" or replacements for rotation. Their files: tls_file("worker-w9.pem").
  absl::Status MakeCertificates(const std::vector<std::string>& names);
  std::string tls_file(const std::string& name) const { return directory_ + "/tls/" + name; }
  // Everything a process wrote, for diagnostics: "coordinator" or "w0" ...
  std::string Log(const std::string& name) const;

  // Starts another program whose output goes to DIRECTORY/NAME.log; stopped with the cluster.
  absl::StatusOr<ChildProcess*> Spawn(const std::string& name, const std::vector<std::string>& argv);

  // Restarts worker i with the same id and socket (after it was killed), or starts it
  // for the first time when options.started_workers left it out.
  absl::Status RestartWorker(int i);
  // Starts a second process with worker i's id and credentials (a new incarnation) while
  // worker i may still run: its own socket and port file, its log DIRECTORY/wI-twin.log.
  absl::StatusOr<ChildProcess*> SpawnWorkerTwin(int i);
  // Restarts the coordinator on the same address (after it was killed); its HTTP port
  // may change (coordinator_http_address()).
  absl::Status RestartCoordinator();

 private:
  LocalCluster() = default;
  absl::Status StartWorker(int i);
  // A worker's command line: id of worker i, files named `name` (its id, or a twin's).
  std::vector<std::string> WorkerArgv(int i, const std::string& name) const;
  // Starts the coordinator on `listen` and waits for its port files.
  absl::Status StartCoordinator(const std::string& listen, const SteadyDeadline& deadline);
  // Waits for worker i's port files (and HTTP port file) after StartWorker.
  absl::Status AwaitWorker(int i, const SteadyDeadline& deadline);
  // The flags that make a daemon serve HTTP and write its port to DIRECTORY/NAME.http.
  std::vector<std::string> HttpFlags(const std::string& name) const;
  // Writes the token and makes the certificates options_.security asks for.
  absl::Status MakeSecrets();
  // The authentication flags of daemon `name` ("coordinator", "w0", ...).
  std::vector<std::string> SecurityFlags(const std::string& name) const;

  LocalClusterOptions options_;
  std::string directory_;
  std::string coordinator_address_;
  std::string coordinator_http_;
  ClusterCredentials client_;
  std::string http_token_;
  std::vector<std::string> worker_http_;
  ChildProcess coordinator_;
  std::vector<ChildProcess> workers_;
  std::vector<std::unique_ptr<ChildProcess>> others_;
};

}  // namespace ringsync
