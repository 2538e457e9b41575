// End to end, the timers: every timer of the daemons is a flag, checked at start, and the
// lease — a worker that could not renew it stops acting on its generation.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/run_daemon.h"
#include "tools/cluster/child_process.h"
#include "core/testing/read_file.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::RunDaemon;

TEST(TimerFlags, AWorkerRefusesToStartWithATimerOutOfRangeNamingTheFlag) {
  for (const std::string& flag :
       {std::string("--abort_notice_timeout=0s"), std::string("--connect_retry_initial=0s"),
        std::string("--connect_retry_max=2h"), std::string("--ring_open_attempt=1ms"),
        std::string("--keepalive_time=0s"), std::string("--keepalive_timeout=5h")}) {
    const auto [exit_code, output] = RunDaemon("worker", {flag, "--coordinator=127.0.0.1:1"});
    EXPECT_EQ(exit_code, 2) << flag << ": " << output;
    EXPECT_THAT(output, HasSubstr(flag.substr(0, flag.find('=')))) << output;
  }
}

TEST(TimerFlags, ARetryCeilingBelowItsFirstPauseIsRefused) {
  const auto [exit_code, output] =
      RunDaemon("worker", {"--connect_retry_initial=1s", "--connect_retry_max=100ms",
                           "--coordinator=127.0.0.1:1"});
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_THAT(output, HasSubstr("--connect_retry_max=100ms is outside 1s..")) << output;
}

TEST(TimerFlags, ACoordinatorRefusesToStartWithAKeepaliveOutOfRange) {
  const auto [exit_code, output] =
      RunDaemon("coordinator", {"--world_size=1", "--listen=127.0.0.1:0", "--keepalive_time=1ms"});
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_THAT(output, HasSubstr("--keepalive_time=1ms is outside 10ms..1h")) << output;
}

}  // namespace
}  // namespace ringsync

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::ConnectAll;
using testing::StartCluster;

// The coordinator's lease at the tests' 100 ms scale.
const std::vector<std::string> kShortLease = {"--heartbeat_timeout=500ms",
                                              "--heartbeat_interval=100ms"};

TEST(Lease, AWorkerFrozenPastItsLeaseNeverReportsItsDeadGenerationAsReady) {
  auto cluster = StartCluster(2, {"--collective_timeout=10s"}, kShortLease, false,
                              ClusterSecurity::kToken);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ASSERT_TRUE(clients[1] != nullptr);
  const uint64_t formed = clients[1]->generation();
  clients.clear();  // both trainers leave cleanly: nothing of theirs is pending

  // Frozen well past the lease: the coordinator loses the worker and the ring dissolves.
  cluster->worker(1).Signal(SIGSTOP);
  absl::SleepFor(absl::Milliseconds(1500));
  cluster->worker(1).Signal(SIGCONT);

  // At once, before the worker heard anything from the coordinator: a training process
  // that connects is not told the dead generation is ready.
  ClientOptions options;
  options.connect_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(cluster->worker_target(1), options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_GT((*client)->generation(), formed)
      << "Connect reported the generation the coordinator dissolved as ready";
  EXPECT_THAT(cluster->Log("w1"), HasSubstr("is fenced"));
}

}  // namespace
}  // namespace ringsync
