// Test helpers for end-to-end tests: a LocalCluster of real ringsyncd processes and
// one SDK client per rank, each on its own thread like a training process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "gtest/gtest.h"
#include "ringsync/client.h"
#include "tools/cluster/local_cluster.h"

namespace ringsync::testing {

// `http`: every daemon also serves /metrics, /healthz and /readyz. The daemons
// authenticate with mutual TLS (certificates made per cluster by deploy/make-certs.sh),
// as a deployment should, unless `security` says otherwise.
inline std::unique_ptr<LocalCluster> StartCluster(
    int world_size, std::vector<std::string> worker_flags = {},
    std::vector<std::string> coordinator_flags = {}, bool http = false,
    ClusterSecurity security = ClusterSecurity::kMutualTls) {
  LocalClusterOptions options;
  options.security = security;
  options.make_certs = RINGSYNC_MAKE_CERTS;
  options.world_size = world_size;
  options.ringsyncd = RINGSYNCD_PATH;
  options.http = http;
  options.worker_flags = std::move(worker_flags);
  options.coordinator_flags = std::move(coordinator_flags);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// Connects an SDK client to each of the first `ranks` workers (all when -1), with
// `base` options (connect timeout and name set here).
inline std::vector<std::unique_ptr<Client>> ConnectAll(LocalCluster& cluster, int ranks = -1,
                                                       const ClientOptions& base = {}) {
  if (ranks < 0) ranks = cluster.world_size();
  std::vector<std::unique_ptr<Client>> clients(ranks);
  std::vector<std::jthread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ClientOptions options = base;
      options.connect_timeout = absl::Seconds(30);
      options.client_name = absl::StrCat("test rank ", r);
      absl::StatusOr<std::unique_ptr<Client>> client =
          Client::Connect(cluster.worker_target(r), options);
      if (client.ok()) clients[r] = *std::move(client);
      else ADD_FAILURE() << "rank " << r << ": " << client.status();
    });
  }
  threads.clear();
  return clients;
}

// The two families of the SDK's paths to the worker, and the client options that pick
// each: staged in registered memory (the staging arena below the shared-memory threshold,
// staging buffers above it), or inline below it and in files above it.
struct StagingPath {
  const char* name;
  ClientOptions options;
};
inline std::vector<StagingPath> StagingPaths() {
  ClientOptions staged;
  staged.stage_in_registered_memory = true;
  staged.staging_arena_bytes = size_t{16} << 20;
  ClientOptions unstaged;
  unstaged.stage_in_registered_memory = false;
  unstaged.staging_arena_bytes = 0;
  return {{"registered memory", staged}, {"inline and files", unstaged}};
}

// Runs fn(rank, client) for every rank concurrently; returns each rank's status.
inline std::vector<absl::Status> OnEveryRank(
    std::vector<std::unique_ptr<Client>>& clients,
    const std::function<absl::Status(int, Client&)>& fn) {
  std::vector<absl::Status> results(clients.size());
  {
    std::vector<std::jthread> threads;
    for (size_t r = 0; r < clients.size(); ++r) {
      threads.emplace_back([&, r] {
        results[r] = clients[r] ? fn(static_cast<int>(r), *clients[r])
                                : absl::UnavailableError("not connected");
      });
    }
  }
  return results;
}

inline void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  }
}

// Whether daemon `name`'s log (LocalCluster::Log) contains `text` within `timeout`.
inline bool AwaitLogLine(LocalCluster& cluster, const std::string& name, const std::string& text,
                         absl::Duration timeout) {
  const SteadyDeadline deadline(timeout);
  while (!deadline.Passed()) {
    if (absl::StrContains(cluster.Log(name), text)) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

}  // namespace ringsync::testing
