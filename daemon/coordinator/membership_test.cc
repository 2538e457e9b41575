// Specification of the coordinator's membership state machine: who may join, how
// ranks and generations are assigned, and how the ring dissolves and re-forms.
// The clock is a variable; no test sleeps.
#include "daemon/coordinator/membership.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration kTimeout = absl::Seconds(5);

class MembershipTest : public ::testing::Test {
 protected:
  explicit MembershipTest(int world_size = 4)
      : MembershipTest(Membership::Options::Fixed(world_size, kTimeout)) {}
  explicit MembershipTest(Membership::Options options) : membership_(options) {}

  // The same incarnation for the same id, as one process rejoining would send.
  static uint64_t IncarnationOf(const std::string& id) {
    return std::hash<std::string>{}(id) | 1;
  }

  static JoinInfo Info(const std::string& id) {
    return JoinInfo{id, absl::StrCat(id, ".test:7500"), "", 0, IncarnationOf(id)};
  }

  // Joins `id` at the current time; fails the test when refused.
  uint64_t MustJoin(const std::string& id) {
    absl::StatusOr<uint64_t> token = membership_.Join(Info(id), now_);
    EXPECT_TRUE(token.ok()) << token.status();
    tokens_[id] = token.value_or(0);
    return token.value_or(0);
  }

  absl::Status Beat(const std::string& id) {
    HeartbeatReport report;
    report.worker_id = id;
    report.session_token = tokens_[id];
    return membership_.Heartbeat(report, now_).status();
  }

  void Advance(absl::Duration d) { now_ += d; }

  std::vector<std::string> MemberIds() const {
    std::vector<std::string> ids;
    for (const ViewMember& m : membership_.view().members) ids.push_back(m.worker_id);
    return ids;
  }

  // The generations of the views published since the last call.
  std::vector<uint64_t> PublishedGenerations() {
    std::vector<uint64_t> out;
    for (const MembershipEvent& e : membership_.TakeEvents()) {
      if (e.kind == MembershipEvent::Kind::kViewPublished) out.push_back(e.view.generation);
    }
    return out;
  }

  void FormRing() {
    for (const char* id : {"w0", "w1", "w2", "w3"}) MustJoin(id);
    ASSERT_TRUE(membership_.view().formed());
  }

  Membership membership_;
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  std::map<std::string, uint64_t> tokens_;
};

TEST_F(MembershipTest, ARestartedCoordinatorNumbersItsViewsAboveWhatItsWorkersHaveSeen) {
  // The workers of a ring at generation 7 rejoin a coordinator that just started.
  for (const char* id : {"w0", "w1", "w2", "w3"}) {
    JoinInfo info = Info(id);
    info.last_generation = std::string(id) == "w2" ? 7 : 5;
    absl::StatusOr<uint64_t> token = membership_.Join(info, now_);
    ASSERT_TRUE(token.ok()) << token.status();
    tokens_[id] = *token;
  }
  EXPECT_EQ(PublishedGenerations(), std::vector<uint64_t>{8});
  // Later views count on from there.
  ASSERT_TRUE(membership_.Leave("w1", tokens_["w1"], "test", now_).ok());
  EXPECT_EQ(PublishedGenerations(), std::vector<uint64_t>{9});
}

TEST_F(MembershipTest, AnImplausibleLastGenerationIsRefused) {
  JoinInfo info = Info("w0");
  info.last_generation = ~uint64_t{0};
  absl::StatusOr<uint64_t> token = membership_.Join(info, now_);
  EXPECT_TRUE(absl::IsInvalidArgument(token.status()));
  EXPECT_THAT(token.status().message(), HasSubstr("implausible"));
}

TEST_F(MembershipTest, BeforeAnyPublicationTheViewIsGenerationZeroAndSaysWhatItWaitsFor) {
  EXPECT_EQ(membership_.view().generation, 0u);
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_THAT(membership_.view().dissolved_reason, HasSubstr("waiting for 4 workers"));
}

TEST_F(MembershipTest, RingFormsOnlyWhenWorldSizeWorkersHaveJoined) {
  MustJoin("w0");
  MustJoin("w1");
  MustJoin("w2");
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_THAT(PublishedGenerations(), IsEmpty());
  MustJoin("w3");
  EXPECT_TRUE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 1u);
  EXPECT_EQ(membership_.view().dissolved_reason, "");
  EXPECT_THAT(PublishedGenerations(), ElementsAre(1u));
}

TEST_F(MembershipTest, RanksFollowSortedWorkerIdsNotJoinOrder) {
  for (const char* id : {"node-c", "node-a", "node-d", "node-b"}) MustJoin(id);
  EXPECT_THAT(MemberIds(), ElementsAre("node-a", "node-b", "node-c", "node-d"));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(membership_.view().members[r].rank, r);
  EXPECT_EQ(membership_.view().members[2].peer_address, Info("node-c").peer_address);
}

TEST_F(MembershipTest, EveryJoinGetsADistinctNonZeroSessionToken) {
  FormRing();
  std::set<uint64_t> distinct;
  for (const auto& [id, token] : tokens_) {
    EXPECT_NE(token, 0u);
    distinct.insert(token);
  }
  EXPECT_EQ(distinct.size(), 4u);
}

TEST_F(MembershipTest, ALiveWorkerIdCannotJoinTwice) {
  MustJoin("w1");
  absl::StatusOr<uint64_t> again = membership_.Join(Info("w1"), now_);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(),
              AllOf(HasSubstr("'w1' is already live"), HasSubstr("unique --worker_id"),
                    HasSubstr("5s")));
  EXPECT_EQ(membership_.live_workers(), 1);
}

TEST_F(MembershipTest, AJoinBeyondWorldSizeIsRefusedAsResourceExhausted) {
  FormRing();
  absl::StatusOr<uint64_t> fifth = membership_.Join(Info("w4"), now_);
  EXPECT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fifth.status().message(),
              AllOf(HasSubstr("ring is full: 4 of 4"), HasSubstr("w0, w1, w2, w3"),
                    HasSubstr("--world_size")));
  EXPECT_EQ(membership_.view().generation, 1u) << "a refused join changes nothing";
}

TEST_F(MembershipTest, JoinValidatesEveryField) {
  const JoinInfo bad[] = {
      {"", "127.0.0.1:7500", ""},
      {"has space", "127.0.0.1:7500", ""},
      {std::string(65, 'w'), "127.0.0.1:7500", ""},
      {"w0", "", ""},
      {"w0", "127.0.0.1", ""},
      {"w0", "0.0.0.0:7500", ""},
      {"w0", "127.0.0.1:7500", "metrics"},
  };
  for (const JoinInfo& info : bad) {
    absl::StatusOr<uint64_t> token = membership_.Join(info, now_);
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument)
        << info.worker_id << " " << info.peer_address << " " << info.http_address;
  }
  EXPECT_EQ(membership_.live_workers(), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(
      membership_.Join({"w0", "127.0.0.1:7500", "127.0.0.1:9100", 0, /*incarnation=*/0}, now_)
          .status()));
  EXPECT_TRUE(membership_.Join({"w0", "127.0.0.1:7500", "127.0.0.1:9100", 0, 77}, now_).ok());
}

// A worker that would cut buffers otherwise than the ring (another --segment_bytes)
// fails every collective: it is refused at its Join, the live workers undisturbed.
TEST_F(MembershipTest, AWorkerWhoseRingSettingsDifferFromALiveWorkersIsRefused) {
  JoinInfo w0 = Info("w0");
  w0.ring_settings = {{"--segment_bytes", "1048576"}, {"--algorithm", "auto"}};
  ASSERT_TRUE(membership_.Join(w0, now_).ok());
  JoinInfo w1 = Info("w1");
  w1.ring_settings = {{"--segment_bytes", "2097152"}, {"--algorithm", "auto"}};
  const absl::StatusOr<uint64_t> refused = membership_.Join(w1, now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("worker 'w1' runs with --segment_bytes=2097152 where 'w0' runs with "
                        "--segment_bytes=1048576"));
  EXPECT_EQ(membership_.live_workers(), 1);
  membership_.TakeEvents();

  w1.ring_settings = w0.ring_settings;
  EXPECT_TRUE(membership_.Join(w1, now_).ok());
  EXPECT_EQ(membership_.live_workers(), 2);
}

TEST_F(MembershipTest, ARingSettingIsComparedWithEveryLiveWorkerButTheJoiningIdsOldSession) {
  const std::vector<RingSetting> old_settings = {{"--segment_bytes", "1048576"}};
  const std::vector<RingSetting> new_settings = {{"--segment_bytes", "65536"}};
  JoinInfo w0 = Info("w0");
  w0.ring_settings = old_settings;
  ASSERT_TRUE(membership_.Join(w0, now_).ok());
  // w0 restarted with new settings, its old session quiet: only its own old session
  // differs, and that one it replaces.
  Advance(absl::Seconds(3));  // beyond two heartbeat intervals
  w0.incarnation += 2;
  w0.ring_settings = new_settings;
  ASSERT_TRUE(membership_.Join(w0, now_).ok());
  EXPECT_EQ(membership_.live_workers(), 1);

  // A worker of the old settings now differs from the live w0.
  JoinInfo w1 = Info("w1");
  w1.ring_settings = old_settings;
  EXPECT_THAT(membership_.Join(w1, now_).status().message(),
              HasSubstr("--segment_bytes=1048576 where 'w0' runs with --segment_bytes=65536"));
}

TEST_F(MembershipTest, RingSettingsOutOfBoundsAreRefusedAsInvalid) {
  JoinInfo w0 = Info("w0");
  w0.ring_settings = {{"--segment bytes", "1"}};
  EXPECT_TRUE(absl::IsInvalidArgument(membership_.Join(w0, now_).status()));
  EXPECT_EQ(membership_.live_workers(), 0);
}

TEST_F(MembershipTest, MissedHeartbeatsDissolveTheRingNamingWorkerRankAndTimeout) {
  FormRing();
  PublishedGenerations();
  Advance(absl::Seconds(3));
  for (const char* id : {"w0", "w1", "w3"}) ASSERT_TRUE(Beat(id).ok());
  Advance(absl::Seconds(2));  // w2 last heard 5s ago
  membership_.Expire(now_);
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 2u);
  EXPECT_EQ(membership_.view().dissolved_reason, "worker w2 (rank 2) missed heartbeats for 5s");
  EXPECT_THAT(PublishedGenerations(), ElementsAre(2u));
  EXPECT_EQ(membership_.live_workers(), 3);
}

TEST_F(MembershipTest, HeartbeatsKeepWorkersAliveIndefinitely) {
  FormRing();
  for (int i = 0; i < 20; ++i) {
    Advance(absl::Seconds(4));
    for (const char* id : {"w0", "w1", "w2", "w3"}) ASSERT_TRUE(Beat(id).ok()) << id;
    membership_.Expire(now_);
  }
  EXPECT_TRUE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 1u);
}

TEST_F(MembershipTest, ExpiryIsDecidedByTheClockNotByWhenExpireRuns) {
  FormRing();
  Advance(kTimeout);
  // No Expire() call in between: the next request sees the overdue workers first.
  EXPECT_EQ(Beat("w0").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(membership_.view().formed());
}

TEST_F(MembershipTest, WorkersLostTogetherDissolveOnceNamingEveryone) {
  FormRing();
  PublishedGenerations();
  Advance(absl::Seconds(4));
  ASSERT_TRUE(Beat("w0").ok());
  ASSERT_TRUE(Beat("w2").ok());
  Advance(absl::Seconds(1));
  membership_.Expire(now_);
  EXPECT_THAT(PublishedGenerations(), ElementsAre(2u));
  EXPECT_EQ(membership_.view().dissolved_reason,
            "worker w1 (rank 1) missed heartbeats for 5s; "
            "worker w3 (rank 3) missed heartbeats for 5s");
}

TEST_F(MembershipTest, ADeadWorkersIdMayRejoinAndTheRingReformsWithTheNextGeneration) {
  FormRing();
  const uint64_t old_token = tokens_["w2"];
  Advance(absl::Seconds(3));
  for (const char* id : {"w0", "w1", "w3"}) ASSERT_TRUE(Beat(id).ok());
  Advance(absl::Seconds(2));
  membership_.Expire(now_);
  ASSERT_EQ(membership_.view().generation, 2u);

  const uint64_t new_token = MustJoin("w2");
  EXPECT_NE(new_token, old_token);
  EXPECT_TRUE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 3u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2", "w3"));
}

TEST_F(MembershipTest, UnknownOrStaleTokensAreNotFoundAndTellTheWorkerToRejoin) {
  FormRing();
  HeartbeatReport stale;
  stale.worker_id = "w1";
  stale.session_token = tokens_["w1"] + 1;
  absl::Status status = membership_.Heartbeat(stale, now_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("stale"), HasSubstr("rejoin")));

  HeartbeatReport unknown;
  unknown.worker_id = "never-joined";
  unknown.session_token = 42;
  status = membership_.Heartbeat(unknown, now_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("never-joined"), HasSubstr("rejoin")));
}

TEST_F(MembershipTest, ALostWorkersHeartbeatSaysWhyItsSessionEnded) {
  FormRing();
  Advance(kTimeout);
  membership_.Expire(now_);
  const absl::Status status = Beat("w3");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("missed heartbeats for 5s"), HasSubstr("rejoin")));
}

TEST_F(MembershipTest, LeaveDissolvesTheRingAtOnce) {
  FormRing();
  PublishedGenerations();
  ASSERT_TRUE(membership_.Leave("w1", tokens_["w1"], "training finished", now_).ok());
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 2u);
  EXPECT_EQ(membership_.view().dissolved_reason, "worker w1 (rank 1) left: training finished");
  EXPECT_THAT(PublishedGenerations(), ElementsAre(2u));
  EXPECT_EQ(Beat("w1").code(), absl::StatusCode::kNotFound) << "the session ended";
}

TEST_F(MembershipTest, LeaveNeedsTheLiveSessionToken) {
  FormRing();
  const absl::Status status = membership_.Leave("w1", tokens_["w1"] + 1, "", now_);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(membership_.view().formed());
}

TEST_F(MembershipTest, LeavingBeforeTheRingFormsPublishesNothing) {
  MustJoin("w0");
  MustJoin("w1");
  PublishedGenerations();
  ASSERT_TRUE(membership_.Leave("w1", tokens_["w1"], "", now_).ok());
  EXPECT_THAT(PublishedGenerations(), IsEmpty());
  EXPECT_EQ(membership_.view().generation, 0u);
  EXPECT_EQ(membership_.live_workers(), 1);
}

TEST_F(MembershipTest, AClosedWatchCountsAsDeathWithoutWaitingForTheTimeout) {
  FormRing();
  membership_.WatchClosed("w3", tokens_["w3"], now_);
  EXPECT_EQ(membership_.view().generation, 2u);
  EXPECT_THAT(membership_.view().dissolved_reason,
              AllOf(HasSubstr("worker w3 (rank 3)"), HasSubstr("WatchRing")));
}

TEST_F(MembershipTest, AClosedWatchOfAnEndedSessionChangesNothing) {
  FormRing();
  const uint64_t old_token = tokens_["w3"];
  ASSERT_TRUE(membership_.Leave("w3", old_token, "restart", now_).ok());
  MustJoin("w3");
  ASSERT_EQ(membership_.view().generation, 3u);
  membership_.WatchClosed("w3", old_token, now_);  // the old session's stream breaks late
  EXPECT_TRUE(membership_.view().formed());
  EXPECT_EQ(membership_.view().generation, 3u);
}

TEST_F(MembershipTest, GenerationGrowsByOneForEveryPublishedView) {
  FormRing();
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(membership_.Leave("w0", tokens_["w0"], "", now_).ok());
    MustJoin("w0");
  }
  EXPECT_THAT(PublishedGenerations(), ElementsAre(1u, 2u, 3u, 4u, 5u, 6u, 7u));
}

TEST_F(MembershipTest, EventsTellTheStoryInOrder) {
  MustJoin("w0");
  MustJoin("w1");
  MustJoin("w2");
  MustJoin("w3");
  Advance(kTimeout);
  membership_.Expire(now_);
  std::vector<std::string> lines;
  for (const MembershipEvent& e : membership_.TakeEvents()) lines.push_back(e.message);
  ASSERT_EQ(lines.size(), 4u + 1u + 4u + 1u);
  EXPECT_THAT(lines[0], HasSubstr("worker w0 joined with peer address w0.test:7500"));
  EXPECT_THAT(lines[3], HasSubstr("(4 of 4 live)"));
  EXPECT_THAT(lines[4], HasSubstr("ring formed: generation 1, 4 ranks [0=w0@w0.test:7500, 1=w1@"));
  EXPECT_EQ(lines[5], "worker w0 (rank 0) missed heartbeats for 5s");
  EXPECT_THAT(lines[9], HasSubstr("ring dissolved: generation 2: worker w0 (rank 0)"));
}

TEST_F(MembershipTest, WorkersSnapshotReportsRanksHeartbeatAgeAndProgress) {
  FormRing();
  Advance(absl::Milliseconds(1500));
  HeartbeatReport report;
  report.worker_id = "w2";
  report.session_token = tokens_["w2"];
  report.generation = 1;
  report.ready = true;
  report.collectives_completed = 17;
  report.collectives_failed = 1;
  report.last_error = "collective #3 failed:\nline two " + std::string(2000, 'x');
  ASSERT_TRUE(membership_.Heartbeat(report, now_).ok());
  Advance(absl::Milliseconds(250));

  std::vector<WorkerSnapshot> workers = membership_.Workers(now_);
  ASSERT_EQ(workers.size(), 4u);
  const WorkerSnapshot& w2 = workers[2];
  EXPECT_EQ(w2.worker_id, "w2");
  EXPECT_EQ(w2.rank, 2);
  EXPECT_TRUE(w2.ready);
  EXPECT_EQ(w2.since_last_heartbeat, absl::Milliseconds(250));
  EXPECT_EQ(w2.collectives_completed, 17u);
  EXPECT_EQ(w2.collectives_failed, 1u);
  EXPECT_THAT(w2.last_error, AllOf(HasSubstr("failed: line two"), Not(HasSubstr("\n"))));
  EXPECT_LE(w2.last_error.size(), 1024u + 3u) << "free text is bounded";
  EXPECT_EQ(workers[0].since_last_heartbeat, absl::Milliseconds(1750)) << "since join";
}

TEST_F(MembershipTest, RanksAreWithdrawnWhileTheRingIsDissolved) {
  FormRing();
  ASSERT_TRUE(membership_.Leave("w0", tokens_["w0"], "", now_).ok());
  for (const WorkerSnapshot& w : membership_.Workers(now_)) EXPECT_EQ(w.rank, -1) << w.worker_id;
}

class SingleWorkerMembershipTest : public MembershipTest {
 protected:
  SingleWorkerMembershipTest() : MembershipTest(1) {}
};

TEST_F(SingleWorkerMembershipTest, ARingOfOneFormsOnTheFirstJoin) {
  MustJoin("solo");
  EXPECT_TRUE(membership_.view().formed());
  EXPECT_THAT(MemberIds(), ElementsAre("solo"));
  EXPECT_EQ(membership_.Join(Info("other"), now_).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ringsync
