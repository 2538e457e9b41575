// Elastic membership end to end: a real coordinator and real workers (ringsyncd
// processes on loopback). A worker killed with SIGKILL is evicted and the survivors
// re-form a ring of 3 on their own; restarted, it joins with a new incarnation and the
// ring grows back to 4. The coordinator is watched through GetClusterStatus, as
// `ringsyncctl status` sees it; every wait is bounded.
#include <signal.h>

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringsync/v1/coordinator.grpc.pb.h"
#include "tests/integration/cluster_fixture.h"
#include "tools/cluster/local_cluster.h"
#include "wire/grpc_options.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Far above lease + grace + start-up on a loaded machine: a bug fails, never hangs.
constexpr absl::Duration kSettleBound = absl::Seconds(30);

class ElasticClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.ringsyncd = RINGSYNCD_PATH;
    options.world_size = 4;
    options.min_world_size = 2;
    options.security = ClusterSecurity::kInsecure;  // so this test may call the coordinator
    // The grace covers the four workers' start on a loaded machine (at 200 ms, a CI run
    // under load saw the ring form with 2, then grow to 3 and 4): it is the first
    // formation this test pins down, not how fast it happens.
    options.coordinator_flags = {"--formation_grace=2s", "--heartbeat_timeout=2s",
                                 "--heartbeat_interval=200ms"};
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    stub_ = v1::Coordinator::NewStub(grpc::CreateCustomChannel(
        cluster_->coordinator_address(), grpc::InsecureChannelCredentials(),
        ControlChannelArguments()));
  }

  // One GetClusterStatus call; a failed call returns its message instead.
  absl::StatusOr<v1::ClusterStatus> Status() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::ClusterStatus status;
    const grpc::Status s = stub_->GetClusterStatus(&context, v1::GetClusterStatusRequest(), &status);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return status;
  }

  // Polls GetClusterStatus until `settled` holds (returns that status) or kSettleBound.
  // A failed call is a poll that saw nothing: right after the coordinator restarts, the
  // channel's first call may still go down the old process's connection ("Broken pipe").
  // The last failure is kept in last_poll_error_ for the message of a test that times out.
  std::optional<v1::ClusterStatus> AwaitStatus(
      const std::function<bool(const v1::ClusterStatus&)>& settled) {
    const SteadyDeadline deadline(kSettleBound);
    while (!deadline.Passed()) {
      absl::StatusOr<v1::ClusterStatus> status = Status();
      if (!status.ok()) {
        last_poll_error_ = status.status();
      } else if (settled(*status)) {
        return *std::move(status);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return std::nullopt;
  }

  std::string Diagnostics() {
    return absl::StrCat("last failed poll: ", last_poll_error_.ToString(), "\n",
                        cluster_->Log("coordinator"));
  }

  // Every member of the current view reports being ready in that generation: the
  // workers followed the view and connected its ring.
  static bool EveryMemberReady(const v1::ClusterStatus& status, int members) {
    if (status.view().members_size() != members) return false;
    int ready = 0;
    for (const v1::WorkerStatus& w : status.workers()) {
      if (w.rank() >= 0 && w.ready() && w.generation() == status.view().generation()) ++ready;
    }
    return ready == members;
  }

  static std::vector<std::string> MemberIds(const v1::ClusterStatus& status) {
    std::vector<std::string> ids;
    for (const v1::RingMember& m : status.view().members()) ids.push_back(m.worker_id());
    return ids;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  absl::Status last_poll_error_;
};

TEST_F(ElasticClusterTest, AKilledWorkerIsEvictedTheSurvivorsReformAndItsRestartGrowsTheRing) {
  std::optional<v1::ClusterStatus> formed =
      AwaitStatus([](const v1::ClusterStatus& s) { return EveryMemberReady(s, 4); });
  ASSERT_TRUE(formed.has_value()) << Diagnostics();
  EXPECT_EQ(formed->view().generation(), 1u) << "a cluster starting up forms once";
  EXPECT_EQ(formed->min_world_size(), 2u);
  EXPECT_EQ(formed->max_world_size(), 4u);
  const uint64_t old_incarnation = formed->view().members(2).incarnation();
  EXPECT_NE(old_incarnation, 0u);
  for (const v1::WorkerStatus& w : formed->workers()) {
    std::vector<std::string> settings;
    for (const v1::RingSetting& s : w.ring_settings()) {
      settings.push_back(absl::StrCat(s.flag(), "=", s.value()));
    }
    EXPECT_THAT(settings, ::testing::Contains("--segment_bytes=1048576")) << w.worker_id();
  }

  cluster_->worker(2).Signal(SIGKILL);
  const SteadyStopwatch killed;
  std::optional<v1::ClusterStatus> survivors =
      AwaitStatus([](const v1::ClusterStatus& s) { return EveryMemberReady(s, 3); });
  ASSERT_TRUE(survivors.has_value()) << Diagnostics();
  const absl::Duration reformed_after = killed.Elapsed();
  EXPECT_THAT(MemberIds(*survivors), ElementsAre("w0", "w1", "w3"));
  EXPECT_EQ(survivors->view().generation(), 2u) << "straight from 4 to 3, never dissolved";
  EXPECT_THAT(survivors->view().change_reason(),
              AllOf(HasSubstr("worker w2 (rank 2)"), HasSubstr("re-formed with 3 workers"),
                    AnyOf(HasSubstr("closed its WatchRing"), HasSubstr("missed heartbeats"))));
  std::cerr << "re-formed with 3 (every survivor ready) " << reformed_after << " after SIGKILL\n";

  ASSERT_TRUE(cluster_->RestartWorker(2).ok());
  std::optional<v1::ClusterStatus> grown =
      AwaitStatus([](const v1::ClusterStatus& s) { return EveryMemberReady(s, 4); });
  ASSERT_TRUE(grown.has_value()) << Diagnostics();
  EXPECT_EQ(grown->view().generation(), 3u);
  EXPECT_THAT(MemberIds(*grown), ElementsAre("w0", "w1", "w2", "w3"));
  EXPECT_NE(grown->view().members(2).incarnation(), old_incarnation)
      << "the restarted process is a new incarnation";
  EXPECT_THAT(grown->view().change_reason(), HasSubstr("admitted w2"));
  EXPECT_EQ(grown->membership_changes_total(), 3u);
  const auto& evictions = grown->evictions_total();
  uint64_t evicted = 0;
  for (const auto& [reason, count] : evictions) evicted += count;
  EXPECT_EQ(evicted, 1u);
}

TEST_F(ElasticClusterTest, ARestartedCoordinatorAdoptsTheRingWithoutANewGeneration) {
  std::optional<v1::ClusterStatus> formed =
      AwaitStatus([](const v1::ClusterStatus& s) { return EveryMemberReady(s, 4); });
  ASSERT_TRUE(formed.has_value()) << Diagnostics();
  const v1::RingView before = formed->view();

  ASSERT_TRUE(cluster_->RestartCoordinator().ok());
  // Every worker rejoins reporting the view it is in; the new coordinator takes it over.
  std::optional<v1::ClusterStatus> adopted = AwaitStatus([](const v1::ClusterStatus& s) {
    return s.views_adopted_total() == 1 && EveryMemberReady(s, 4);
  });
  ASSERT_TRUE(adopted.has_value()) << Diagnostics();
  EXPECT_EQ(adopted->view().generation(), before.generation()) << "the ring was not disturbed";
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(adopted->view().members(rank).worker_id(), before.members(rank).worker_id());
    EXPECT_EQ(adopted->view().members(rank).incarnation(), before.members(rank).incarnation());
  }
  EXPECT_EQ(adopted->membership_changes_total(), 0u);
  EXPECT_THAT(adopted->view().change_reason(), HasSubstr("adopted"));
}

}  // namespace
}  // namespace ringsync

namespace ringsync {
namespace {

// A worker started with another --segment_bytes than the ring's would cut every buffer
// otherwise and fail every collective of its ring: it is refused at its Join, exits
// naming the flag and both values, and the ring of the others goes on.
TEST(RingSettings, AWorkerWithAnotherSegmentSizeIsRefusedAtItsJoinAndTheRingGoesOn) {
  LocalClusterOptions options;
  options.ringsyncd = RINGSYNCD_PATH;
  options.world_size = 3;
  options.min_world_size = 2;
  options.started_workers = 2;
  options.worker_flags_of[2] = {"--segment_bytes=2097152"};
  options.coordinator_flags = {"--formation_grace=200ms"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  LocalCluster& cluster = **started;

  const std::string said =
      "worker 'w2' runs with --segment_bytes=2097152 where 'w0' runs with "
      "--segment_bytes=1048576";
  EXPECT_THAT(cluster.RestartWorker(2).message(), HasSubstr(said))
      << "the worker exits before it writes its port file";
  const absl::StatusOr<int> exit_code = cluster.worker(2).Wait(kSettleBound);
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 1);
  EXPECT_THAT(cluster.Log("w2"), HasSubstr("every worker of a ring must run with the same "
                                           "--segment_bytes"));
  EXPECT_THAT(cluster.Log("coordinator"), HasSubstr(said));

  auto clients = testing::ConnectAll(cluster, 2);
  std::vector<std::vector<float>> data = {{1, 2, 3}, {10, 20, 30}};
  testing::ExpectAllOk(testing::OnEveryRank(clients, [&](int r, Client& client) {
    return client.AllReduce("after the refusal", absl::MakeSpan(data[r]), ReduceOp::kSum);
  }));
  EXPECT_THAT(data[0], ElementsAre(11, 22, 33));
  EXPECT_THAT(data[1], ElementsAre(11, 22, 33));
}

}  // namespace
}  // namespace ringsync
