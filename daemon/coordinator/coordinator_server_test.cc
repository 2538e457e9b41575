// Specification of the coordinator as workers see it over gRPC: an in-process
// CoordinatorServer on 127.0.0.1:0, real stubs, real streams.
#include "daemon/coordinator/coordinator_server.h"

#include "core/sync/steady_stopwatch.h"
#include "daemon/metrics/refusals.h"
#include "prometheus/registry.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/metrics/text_page.h"
#include "wire/grpc_options.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringsync/v1/coordinator.grpc.pb.h"
#include "wire/protocol_version.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every call and stream in these tests ends by this deadline: a bug fails, never hangs.
constexpr absl::Duration kCallDeadline = absl::Seconds(10);

std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration deadline = kCallDeadline) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return context;
}

std::vector<std::string> MemberIds(const v1::RingView& view) {
  std::vector<std::string> ids;
  for (const v1::RingMember& m : view.members()) ids.push_back(m.worker_id());
  return ids;
}

// One worker's WatchRing stream.
class Watch {
 public:
  Watch(v1::Coordinator::Stub& stub, const std::string& worker_id, uint64_t token)
      : context_(NewContext()) {
    v1::WatchRingRequest request;
    request.set_worker_id(worker_id);
    request.set_session_token(token);
    reader_ = stub.WatchRing(context_.get(), request);
  }

  // The next view, or nullopt when the stream ended.
  std::optional<v1::RingView> Next() {
    v1::RingView view;
    if (!reader_->Read(&view)) return std::nullopt;
    return view;
  }

  // Reads until a view of `generation` arrives (nullopt if the stream ends first).
  std::optional<v1::RingView> WaitForGeneration(uint64_t generation) {
    for (std::optional<v1::RingView> view = Next(); view; view = Next()) {
      if (view->generation() == generation) return view;
    }
    return std::nullopt;
  }

  // Reads what is left, then the final status.
  grpc::Status Finish() {
    while (Next()) {
    }
    return reader_->Finish();
  }

  void Cancel() { context_->TryCancel(); }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<v1::RingView>> reader_;
};

class CoordinatorServerTest : public ::testing::Test {
 protected:
  void Start(int world_size, absl::Duration heartbeat_timeout = absl::Seconds(30),
             absl::Duration heartbeat_interval = absl::Seconds(1)) {
    CoordinatorOptions options;
    options.min_world_size = options.max_world_size = world_size;
    options.heartbeat_timeout = heartbeat_timeout;
    options.heartbeat_interval = heartbeat_interval;
    Start(options);
  }

  void Start(CoordinatorOptions options) {
    options.listen = "127.0.0.1:0";
    options.refusals = [this](absl::string_view reason, absl::string_view detail) {
      refusals_.Refuse(reason, detail);
    };
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(),
                                         ControlChannelArguments());
    stub_ = v1::Coordinator::NewStub(channel_);
  }

  // A first join of `worker_id`: its own peer port and an incarnation of its own.
  v1::JoinRequest JoinRequest(const std::string& worker_id) {
    v1::JoinRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_worker_id(worker_id);
    request.set_peer_address(absl::StrCat("127.0.0.1:", 7500 + tokens_.size()));
    request.set_incarnation(std::hash<std::string>{}(worker_id) | 1);
    return request;
  }

  grpc::Status Join(const v1::JoinRequest& request, v1::JoinResponse* response = nullptr) {
    v1::JoinResponse local;
    if (response == nullptr) response = &local;
    grpc::Status status = stub_->Join(NewContext().get(), request, response);
    if (status.ok()) tokens_[request.worker_id()] = response->session_token();
    return status;
  }

  grpc::Status Join(const std::string& worker_id, v1::JoinResponse* response = nullptr,
                    v1::ProtocolVersion version = kProtocolVersion) {
    v1::JoinRequest request = JoinRequest(worker_id);
    request.set_protocol_version(version);
    return Join(request, response);
  }

  grpc::Status Heartbeat(const std::string& worker_id, v1::HeartbeatResponse* response = nullptr) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker_id);
    request.set_session_token(tokens_[worker_id]);
    v1::HeartbeatResponse local;
    return stub_->Heartbeat(NewContext().get(), request, response ? response : &local);
  }

  grpc::Status Leave(const std::string& worker_id, const std::string& reason) {
    v1::LeaveRequest request;
    request.set_worker_id(worker_id);
    request.set_session_token(tokens_[worker_id]);
    request.set_reason(reason);
    v1::LeaveResponse response;
    return stub_->Leave(NewContext().get(), request, &response);
  }

  v1::ClusterStatus ClusterStatus() {
    v1::ClusterStatus status;
    const grpc::Status s =
        stub_->GetClusterStatus(NewContext().get(), v1::GetClusterStatusRequest(), &status);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return status;
  }

  std::unique_ptr<Watch> WatchAs(const std::string& worker_id) {
    return std::make_unique<Watch>(*stub_, worker_id, tokens_[worker_id]);
  }

  // Joins w0..w3, each opening its watch right after joining; all see the formed view.
  std::vector<std::unique_ptr<Watch>> FormRingOfFour() {
    std::vector<std::unique_ptr<Watch>> watches;
    for (const char* id : {"w0", "w1", "w2", "w3"}) {
      EXPECT_TRUE(Join(id).ok()) << id;
      watches.push_back(WatchAs(id));
    }
    for (auto& watch : watches) {
      std::optional<v1::RingView> formed = watch->WaitForGeneration(1);
      EXPECT_TRUE(formed.has_value());
    }
    return watches;
  }

  prometheus::Registry metrics_;
  metrics::Refusals refusals_{metrics_};
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::map<std::string, uint64_t> tokens_;
};

TEST_F(CoordinatorServerTest, BindsAnEphemeralPortOnLoopback) {
  Start(4);
  EXPECT_THAT(server_->address(), HasSubstr("127.0.0.1:"));
  EXPECT_NE(server_->address(), "127.0.0.1:0");
}

TEST_F(CoordinatorServerTest, JoinAnswersWorldSizeSessionTokenAndHeartbeatInterval) {
  Start(4, absl::Seconds(30), absl::Milliseconds(750));
  v1::JoinResponse response;
  ASSERT_TRUE(Join("w0", &response).ok());
  EXPECT_EQ(response.world_size(), 4u);
  EXPECT_NE(response.session_token(), 0u);
  EXPECT_EQ(response.heartbeat_interval_ms(), 750);
}

TEST_F(CoordinatorServerTest, AProtocolMismatchIsRefusedSayingWhatHappenedAndWhatToDo) {
  Start(4);
  grpc::Status status = Join("w0", nullptr, v1::PROTOCOL_VERSION_UNSPECIFIED);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("protocol version mismatch"), HasSubstr("worker 'w0'"),
                    HasSubstr("PROTOCOL_VERSION_UNSPECIFIED (0)"),
                    HasSubstr("PROTOCOL_VERSION_5 (5)"),
                    HasSubstr("run the same ringsyncd release")));
  // A worker of the release before the small-message algorithms: it could decode none of
  // their frames, so it never joins a ring beside this release's workers.
  status = Join("w0", nullptr, v1::PROTOCOL_VERSION_3);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("PROTOCOL_VERSION_3 (3)"));
  // A worker of the release before the shifted ring order: its small all-reduces would
  // combine in another order than this release's, and results would differ between ranks.
  status = Join("w0", nullptr, v1::PROTOCOL_VERSION_4);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("PROTOCOL_VERSION_4 (4)"));
  status = Join("w0", nullptr, static_cast<v1::ProtocolVersion>(7));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown version 7"));
}

TEST_F(CoordinatorServerTest, RefusalsKeepTheirStatusCodesOverTheWire) {
  Start(2);
  ASSERT_TRUE(Join("w0").ok());
  EXPECT_EQ(Join("w0").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Join("bad id").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Join("w1").ok());
  const grpc::Status full = Join("w2");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(full.error_message(), HasSubstr("ring is full"));
}

TEST_F(CoordinatorServerTest, ARequestLargerThanTheLimitIsRefusedUnreadAndServiceGoesOn) {
  Start(2);
  v1::JoinRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_worker_id(std::string(2 << 20, 'w'));  // over the default 1 MiB
  request.set_peer_address("127.0.0.1:7500");
  v1::JoinResponse response;
  const grpc::Status status = stub_->Join(NewContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_TRUE(Join("w0").ok());
}

TEST_F(CoordinatorServerTest, RefusedCallsAreCountedEachAndLoggedAtMostOncePerSecond) {
  Start(1);
  ASSERT_TRUE(Join("w0").ok());
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(Join(absl::StrCat("extra", i)).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  EXPECT_EQ(refusals_.Count("join"), 200u);
}

TEST_F(CoordinatorServerTest, WatchRingSendsTheCurrentViewAtOnceThenTheFormedViewToAllFour) {
  Start(4);
  std::vector<std::unique_ptr<Watch>> watches;
  for (const char* id : {"w2", "w0", "w3"}) {
    ASSERT_TRUE(Join(id).ok());
    watches.push_back(WatchAs(id));
    std::optional<v1::RingView> current = watches.back()->Next();
    ASSERT_TRUE(current.has_value());
    EXPECT_EQ(current->generation(), 0u);
    EXPECT_EQ(current->members_size(), 0);
    EXPECT_THAT(current->dissolved_reason(), HasSubstr("waiting for 4 workers"));
  }
  ASSERT_TRUE(Join("w1").ok());
  watches.push_back(WatchAs("w1"));
  for (auto& watch : watches) {
    std::optional<v1::RingView> formed = watch->WaitForGeneration(1);
    ASSERT_TRUE(formed.has_value());
    EXPECT_THAT(MemberIds(*formed), ElementsAre("w0", "w1", "w2", "w3"));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(formed->members(r).rank(), r);
    EXPECT_EQ(formed->dissolved_reason(), "");
  }
}

TEST_F(CoordinatorServerTest, EveryMemberOfAViewCarriesTheAddressItsJoinCameFrom) {
  Start(2);
  ASSERT_TRUE(Join("w0").ok());
  ASSERT_TRUE(Join("w1").ok());
  std::optional<v1::RingView> formed = WatchAs("w0")->WaitForGeneration(1);
  ASSERT_TRUE(formed.has_value());
  ASSERT_EQ(formed->members_size(), 2);
  // The peers' fallback when the advertised name does not resolve (RingMember).
  for (const v1::RingMember& m : formed->members()) EXPECT_EQ(m.observed_host(), "127.0.0.1");
}

TEST_F(CoordinatorServerTest, ACancelledWatchIsDeathAndTheOthersSeeADissolvedViewNamingIt) {
  Start(4, /*heartbeat_timeout=*/absl::Seconds(30));
  std::vector<std::unique_ptr<Watch>> watches = FormRingOfFour();
  const SteadyStopwatch cancelled_at;
  watches[2]->Cancel();  // w2's process "dies": its stream breaks
  for (int i : {0, 1, 3}) {
    std::optional<v1::RingView> dissolved = watches[i]->Next();
    ASSERT_TRUE(dissolved.has_value()) << "watcher w" << i;
    EXPECT_EQ(dissolved->generation(), 2u);
    EXPECT_EQ(dissolved->members_size(), 0);
    EXPECT_THAT(dissolved->dissolved_reason(),
                AllOf(HasSubstr("worker w2 (rank 2)"), HasSubstr("WatchRing")));
  }
  EXPECT_LT(cancelled_at.Elapsed(), absl::Seconds(5)) << "not the 30s heartbeat timeout";
  const grpc::Status heartbeat = Heartbeat("w2");
  EXPECT_EQ(heartbeat.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(heartbeat.error_message(), HasSubstr("rejoin"));
}

TEST_F(CoordinatorServerTest, ALostWorkerRejoinsAndTheRingReformsAtTheNextGeneration) {
  Start(4);
  std::vector<std::unique_ptr<Watch>> watches = FormRingOfFour();
  watches[2]->Cancel();
  ASSERT_TRUE(watches[0]->WaitForGeneration(2).has_value());
  ASSERT_TRUE(Join("w2").ok());
  std::optional<v1::RingView> reformed = watches[0]->WaitForGeneration(3);
  ASSERT_TRUE(reformed.has_value());
  EXPECT_THAT(MemberIds(*reformed), ElementsAre("w0", "w1", "w2", "w3"));
}

TEST_F(CoordinatorServerTest, MissedHeartbeatsDissolveTheRingAndEndTheLostWorkersWatch) {
  Start(2, /*heartbeat_timeout=*/absl::Milliseconds(400), absl::Milliseconds(100));
  ASSERT_TRUE(Join("w0").ok());
  ASSERT_TRUE(Join("w1").ok());
  std::unique_ptr<Watch> w0 = WatchAs("w0");
  std::unique_ptr<Watch> w1 = WatchAs("w1");  // open, but w1 never sends a heartbeat
  std::atomic<bool> stop{false};
  std::thread beating([&] {
    while (!stop.load()) {
      EXPECT_TRUE(Heartbeat("w0").ok());
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  std::optional<v1::RingView> dissolved = w0->WaitForGeneration(2);
  stop = true;
  beating.join();
  ASSERT_TRUE(dissolved.has_value());
  EXPECT_EQ(dissolved->dissolved_reason(), "worker w1 (rank 1) missed heartbeats for 400ms");

  ASSERT_TRUE(w1->WaitForGeneration(2).has_value()) << "the lost worker sees the view too";
  const grpc::Status ended = w1->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(ended.error_message(),
              AllOf(HasSubstr("session of worker w1 ended"), HasSubstr("rejoin")));
}

TEST_F(CoordinatorServerTest, HeartbeatReportsTheCurrentGeneration) {
  Start(1);
  ASSERT_TRUE(Join("solo").ok());
  v1::HeartbeatResponse response;
  ASSERT_TRUE(Heartbeat("solo", &response).ok());
  EXPECT_EQ(response.current_generation(), 1u);
}

TEST_F(CoordinatorServerTest, LeaveDissolvesTheRingAtOnce) {
  Start(2);
  ASSERT_TRUE(Join("w0").ok());
  ASSERT_TRUE(Join("w1").ok());
  std::unique_ptr<Watch> w0 = WatchAs("w0");
  ASSERT_TRUE(w0->WaitForGeneration(1).has_value());
  ASSERT_TRUE(Leave("w1", "training finished").ok());
  std::optional<v1::RingView> dissolved = w0->Next();
  ASSERT_TRUE(dissolved.has_value());
  EXPECT_EQ(dissolved->generation(), 2u);
  EXPECT_EQ(dissolved->dissolved_reason(), "worker w1 (rank 1) left: training finished");
}

TEST_F(CoordinatorServerTest, ItsMetricsPageFollowsTheMembership) {
  Start(2);
  CoordinatorCollector collector(*server_);
  std::string page = metrics::TextPage({&collector});
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_workers_joined 0\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_world_size 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_ring_formed 0\n"));
  EXPECT_THAT(page, HasSubstr("# TYPE ringsync_coordinator_heartbeat_age_seconds gauge"))
      << "documented while no worker is live";

  ASSERT_TRUE(Join("w0").ok());
  ASSERT_TRUE(Join("w1").ok());
  page = metrics::TextPage({&collector});
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_workers_joined 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_joins_total 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_ring_formed 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_generation 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_generations_published_total 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_heartbeat_age_seconds{worker_id=\"w0\"}"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_heartbeat_age_seconds{worker_id=\"w1\"}"));
}

TEST_F(CoordinatorServerTest, AWatchWithoutALiveSessionIsRefused) {
  Start(2);
  ASSERT_TRUE(Join("w0").ok());
  Watch watch(*stub_, "w0", tokens_["w0"] + 1);
  const grpc::Status status = watch.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), AllOf(HasSubstr("stale"), HasSubstr("rejoin")));
}

TEST_F(CoordinatorServerTest, ClusterStatusShowsTheViewAndWhatEachWorkerReported) {
  Start(2);
  ASSERT_TRUE(Join("w1").ok());
  ASSERT_TRUE(Join("w0").ok());
  v1::HeartbeatRequest report;
  report.set_worker_id("w1");
  report.set_session_token(tokens_["w1"]);
  report.set_generation(1);
  report.set_ready(true);
  report.set_collectives_completed(12);
  report.set_collectives_failed(1);
  report.set_last_error("collective #7 'grad/fc1': rank 0 timed out");
  v1::HeartbeatResponse ack;
  ASSERT_TRUE(stub_->Heartbeat(NewContext().get(), report, &ack).ok());

  const v1::ClusterStatus status = ClusterStatus();
  EXPECT_EQ(status.world_size(), 2u);
  EXPECT_EQ(status.generations_published(), 1u);
  EXPECT_THAT(MemberIds(status.view()), ElementsAre("w0", "w1"));
  ASSERT_EQ(status.workers_size(), 2);
  const v1::WorkerStatus& w0 = status.workers(0);
  const v1::WorkerStatus& w1 = status.workers(1);
  EXPECT_EQ(w0.worker_id(), "w0");
  EXPECT_EQ(w0.rank(), 0);
  EXPECT_FALSE(w0.ready());
  EXPECT_EQ(w1.rank(), 1);
  EXPECT_EQ(w1.peer_address(), "127.0.0.1:7500");
  EXPECT_TRUE(w1.ready());
  EXPECT_EQ(w1.generation(), 1u);
  EXPECT_EQ(w1.collectives_completed(), 12u);
  EXPECT_EQ(w1.collectives_failed(), 1u);
  EXPECT_EQ(w1.last_error(), "collective #7 'grad/fc1': rank 0 timed out");
  EXPECT_GE(w1.last_heartbeat_age_ms(), 0);
  EXPECT_LT(w1.last_heartbeat_age_ms(), 5000);
}

TEST_F(CoordinatorServerTest, TheHealthServiceAnswersServing) {
  Start(2);
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      health->Check(NewContext().get(), grpc::health::v1::HealthCheckRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(CoordinatorServerTest, ShutdownEndsOpenWatchesPromptlyWithUnavailable) {
  Start(4);
  std::vector<std::unique_ptr<Watch>> watches;
  for (const char* id : {"w0", "w1"}) {
    ASSERT_TRUE(Join(id).ok());
    watches.push_back(WatchAs(id));
    ASSERT_TRUE(watches.back()->Next().has_value());
  }
  const SteadyStopwatch start;
  server_->Shutdown(absl::Seconds(5));
  EXPECT_LT(start.Elapsed(), absl::Seconds(2)) << "open watches must not hold shutdown";
  for (auto& watch : watches) {
    const grpc::Status status = watch->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  }
}

TEST_F(CoordinatorServerTest, ShutdownDoesNotWaitForAClientThatStoppedReading) {
  Start(1);
  ASSERT_TRUE(Join("solo").ok());
  std::unique_ptr<Watch> idle = WatchAs("solo");  // never read
  const SteadyStopwatch start;
  server_->Shutdown(absl::Milliseconds(500));
  EXPECT_LT(start.Elapsed(), absl::Seconds(3));
}

// --- Elastic membership over the wire (the rules: elastic_membership_test.cc) ----------

// A grace long enough that four joins in a row never straddle it, even on a loaded machine.
CoordinatorOptions ElasticOptions(int min_world_size, int max_world_size,
                                  absl::Duration heartbeat_interval = absl::Milliseconds(100)) {
  CoordinatorOptions options;
  options.min_world_size = min_world_size;
  options.max_world_size = max_world_size;
  options.formation_grace = absl::Seconds(1);
  options.heartbeat_timeout = absl::Seconds(30);
  options.heartbeat_interval = heartbeat_interval;
  return options;
}

TEST_F(CoordinatorServerTest, AnElasticRingReformsWithTheSurvivorsWhenAMembersWatchBreaks) {
  Start(ElasticOptions(2, 4));
  std::vector<std::unique_ptr<Watch>> watches = FormRingOfFour();
  watches[2]->Cancel();
  for (int i : {0, 1, 3}) {
    std::optional<v1::RingView> reformed = watches[i]->WaitForGeneration(2);
    ASSERT_TRUE(reformed.has_value()) << i;
    EXPECT_THAT(MemberIds(*reformed), ElementsAre("w0", "w1", "w3"));
    EXPECT_EQ(reformed->dissolved_reason(), "");
    EXPECT_THAT(reformed->change_reason(),
                AllOf(HasSubstr("worker w2 (rank 2) closed its WatchRing stream"),
                      HasSubstr("re-formed with 3 workers")));
  }
  CoordinatorCollector collector(*server_);
  const std::string page = metrics::TextPage({&collector});
  EXPECT_THAT(page, HasSubstr("ringsync_evictions_total{reason=\"watch_closed\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_evictions_total{reason=\"heartbeat_timeout\"} 0\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_membership_changes_total 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_ring_size 3\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_min_world_size 2\n"));
  EXPECT_THAT(page, HasSubstr("ringsync_coordinator_world_size 4\n"));
}

TEST_F(CoordinatorServerTest, FewerThanMaxWorkersFormAfterTheFormationGrace) {
  Start(ElasticOptions(2, 4));
  v1::JoinResponse response;
  ASSERT_TRUE(Join("w0", &response).ok());
  EXPECT_EQ(response.min_world_size(), 2u);
  EXPECT_EQ(response.max_world_size(), 4u);
  ASSERT_TRUE(Join("w1").ok());
  std::unique_ptr<Watch> watch = WatchAs("w0");
  std::optional<v1::RingView> formed = watch->WaitForGeneration(1);
  ASSERT_TRUE(formed.has_value());
  EXPECT_THAT(MemberIds(*formed), ElementsAre("w0", "w1"));
  EXPECT_THAT(formed->change_reason(), HasSubstr("formed with w0, w1"));
}

TEST_F(CoordinatorServerTest, ARestartedWorkerReplacesItsQuietSessionAndViewsCarryIncarnations) {
  Start(ElasticOptions(2, 4));
  std::vector<std::unique_ptr<Watch>> watches = FormRingOfFour();
  absl::SleepFor(absl::Milliseconds(300));  // w2 sends no heartbeat: more than 2 intervals
  for (const char* id : {"w0", "w1", "w3"}) ASSERT_TRUE(Heartbeat(id).ok());
  v1::JoinRequest restarted = JoinRequest("w2");
  restarted.set_peer_address("127.0.0.1:7600");
  restarted.set_incarnation(restarted.incarnation() + 2);
  ASSERT_TRUE(Join(restarted).ok());
  std::optional<v1::RingView> reformed = watches[0]->WaitForGeneration(2);
  ASSERT_TRUE(reformed.has_value());
  ASSERT_EQ(reformed->members_size(), 4);
  EXPECT_EQ(reformed->members(2).incarnation(), restarted.incarnation());
  EXPECT_EQ(reformed->members(2).peer_address(), "127.0.0.1:7600");
  EXPECT_THAT(reformed->change_reason(), HasSubstr("replaced by its restarted process"));
  const grpc::Status old_watch = watches[2]->Finish();
  EXPECT_EQ(old_watch.error_code(), grpc::StatusCode::NOT_FOUND);

  const v1::ClusterStatus status = ClusterStatus();
  EXPECT_EQ(status.min_world_size(), 2u);
  EXPECT_EQ(status.max_world_size(), 4u);
  EXPECT_EQ(status.evictions_total().at("restarted"), 1u);
  EXPECT_EQ(status.workers(2).incarnation(), restarted.incarnation());
}

TEST_F(CoordinatorServerTest, ASecondDaemonWithALiveWorkersIdIsRefusedNamingBothIncarnations) {
  Start(ElasticOptions(2, 4, /*heartbeat_interval=*/absl::Seconds(2)));
  std::vector<std::unique_ptr<Watch>> watches = FormRingOfFour();
  ASSERT_TRUE(Heartbeat("w2").ok());
  v1::JoinRequest duplicate = JoinRequest("w2");
  duplicate.set_incarnation(duplicate.incarnation() + 2);
  const grpc::Status status = Join(duplicate);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr(absl::StrCat("incarnation ", duplicate.incarnation())),
                    HasSubstr("unique --worker_id")));
}

TEST_F(CoordinatorServerTest, AJoinWithoutAnIncarnationIsRefused) {
  Start(2);
  v1::JoinRequest request = JoinRequest("w0");
  request.clear_incarnation();
  const grpc::Status status = Join(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("incarnation"));
}

TEST_F(CoordinatorServerTest, ARestartedCoordinatorAdoptsTheRingItsWorkersReport) {
  Start(ElasticOptions(2, 4));
  v1::RingView ring;
  ring.set_generation(7);
  std::vector<v1::JoinRequest> requests;
  for (const char* id : {"w0", "w1", "w2"}) {
    requests.push_back(JoinRequest(id));
    requests.back().set_peer_address(absl::StrCat("127.0.0.1:", 7500 + requests.size()));
    v1::RingMember* m = ring.add_members();
    m->set_rank(static_cast<int>(requests.size()) - 1);
    m->set_worker_id(id);
    m->set_peer_address(requests.back().peer_address());
    m->set_incarnation(requests.back().incarnation());
    m->set_observed_host("198.18.0.99");  // what the old coordinator saw, say
  }
  for (v1::JoinRequest& request : requests) {
    request.set_last_generation(7);
    *request.mutable_current_view() = ring;
    ASSERT_TRUE(Join(request).ok());
  }
  std::unique_ptr<Watch> watch = WatchAs("w0");
  std::optional<v1::RingView> adopted = watch->Next();
  ASSERT_TRUE(adopted.has_value());
  EXPECT_EQ(adopted->generation(), 7u);
  EXPECT_THAT(MemberIds(*adopted), ElementsAre("w0", "w1", "w2"));
  EXPECT_THAT(adopted->change_reason(), HasSubstr("adopted"));
  // The addresses in the adopted view are the ones this coordinator saw, not reported ones.
  for (const v1::RingMember& m : adopted->members()) EXPECT_EQ(m.observed_host(), "127.0.0.1");
  const v1::ClusterStatus status = ClusterStatus();
  EXPECT_EQ(status.views_adopted_total(), 1u);
  EXPECT_EQ(status.membership_changes_total(), 0u);
}

TEST(CoordinatorServerOptions, BadOptionsAreRefusedNamingTheFlag) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.max_world_size = 0;
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(),
              AllOf(HasSubstr("--max_world_size=0"), HasSubstr("--world_size")));
  options.max_world_size = 1025;
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(), HasSubstr("1..1024"));
  options.max_world_size = 2;
  options.min_world_size = 3;
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(),
              AllOf(HasSubstr("--min_world_size=3"), HasSubstr("1..2")));
  options.min_world_size = 0;
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(),
              HasSubstr("--min_world_size=0"));
  options.min_world_size = 1;
  options.formation_grace = absl::Seconds(-1);
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(),
              HasSubstr("--formation_grace"));
  options.formation_grace = absl::Seconds(1);
  options.heartbeat_interval = absl::Seconds(10);
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(),
              HasSubstr("--heartbeat_interval"));
  options.heartbeat_interval = absl::Seconds(1);
  options.listen = "127.0.0.1";
  EXPECT_THAT(CoordinatorServer::Start(options).status().message(), HasSubstr("--listen"));
}

TEST(CoordinatorServerStart, AnAddressInUseIsUnavailableAndSaysSo) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> first = CoordinatorServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.listen = (*first)->address();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second = CoordinatorServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(options.listen));
}

}  // namespace
}  // namespace ringsync
