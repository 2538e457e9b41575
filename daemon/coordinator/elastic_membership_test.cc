// Specification of elastic membership (membership.h): a ring between --min_world_size and
// --max_world_size workers that forms once after a start-up burst, re-forms with the
// survivors when a member is evicted, admits newcomers in batches, tells a restarted
// process from a duplicate daemon by its incarnation, and is adopted unchanged by a
// restarted coordinator. The clock is a variable; no test sleeps.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/coordinator/membership.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kLease = absl::Seconds(5);
constexpr absl::Duration kInterval = absl::Seconds(1);
constexpr absl::Duration kGrace = absl::Seconds(1);

Membership::Options Elastic(int min_world_size, int max_world_size) {
  Membership::Options options;
  options.min_world_size = min_world_size;
  options.max_world_size = max_world_size;
  options.heartbeat_timeout = kLease;
  options.heartbeat_interval = kInterval;
  options.formation_grace = kGrace;
  return options;
}

class ElasticMembershipTest : public ::testing::Test {
 protected:
  explicit ElasticMembershipTest(Membership::Options options = Elastic(2, 4))
      : membership_(options) {}

  // The first process of each id gets incarnation 100 + its index; Restart() draws anew.
  JoinInfo Info(const std::string& id) {
    auto [it, fresh] = incarnations_.try_emplace(id, 100 + incarnations_.size());
    return JoinInfo{id, absl::StrCat(id, ".test:7500"), "", 0, it->second};
  }

  absl::StatusOr<uint64_t> Join(JoinInfo info) {
    absl::StatusOr<uint64_t> token = membership_.Join(info, now_);
    if (token.ok()) tokens_[info.worker_id] = *token;
    return token;
  }

  void MustJoin(const std::string& id) {
    absl::StatusOr<uint64_t> token = Join(Info(id));
    ASSERT_TRUE(token.ok()) << token.status();
  }

  // `id` starts again as a new process: a new incarnation, no view.
  JoinInfo Restarted(const std::string& id) {
    incarnations_[id] += 1000;
    return Info(id);
  }

  absl::Status Beat(const std::string& id) {
    HeartbeatReport report;
    report.worker_id = id;
    report.session_token = tokens_[id];
    return membership_.Heartbeat(report, now_).status();
  }

  // Advances the clock in heartbeat intervals; every id but `silent` keeps beating.
  void Pass(absl::Duration d, const std::vector<std::string>& silent = {}) {
    const absl::Time until = now_ + d;
    while (now_ < until) {
      now_ = std::min(until, now_ + kInterval / 2);
      for (const auto& [id, token] : tokens_) {
        if (std::find(silent.begin(), silent.end(), id) == silent.end()) (void)Beat(id);
      }
      membership_.Expire(now_);
    }
  }

  std::vector<std::string> MemberIds() const {
    std::vector<std::string> ids;
    for (const ViewMember& m : membership_.view().members) ids.push_back(m.worker_id);
    return ids;
  }

  std::vector<View> Published() {
    std::vector<View> out;
    for (MembershipEvent& e : membership_.TakeEvents()) {
      if (e.kind == MembershipEvent::Kind::kViewPublished) out.push_back(std::move(e.view));
    }
    return out;
  }

  void FormRingOfFour() {
    for (const char* id : {"w0", "w1", "w2", "w3"}) MustJoin(id);
    ASSERT_EQ(MemberIds(), (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
    Published();
  }

  Membership membership_;
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  std::map<std::string, uint64_t> tokens_;
  std::map<std::string, uint64_t> incarnations_;
};

// --- Formation ---------------------------------------------------------------------

TEST_F(ElasticMembershipTest, TheRingFormsAtOnceWhenMaxWorldSizeWorkersAreLive) {
  for (const char* id : {"w0", "w1", "w2", "w3"}) MustJoin(id);
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].generation, 1u);
  EXPECT_EQ(views[0].members.size(), 4u);
}

TEST_F(ElasticMembershipTest, AStartUpBurstFormsOnceAfterTheGraceWithEveryoneLive) {
  MustJoin("w0");
  Pass(absl::Milliseconds(400));
  MustJoin("w1");
  Pass(absl::Milliseconds(400));
  MustJoin("w2");
  Pass(kGrace - absl::Milliseconds(100));
  EXPECT_FALSE(membership_.view().formed()) << "arrivals have not paused for the grace yet";
  Pass(absl::Milliseconds(100));
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u) << "one formation, not one per arrival";
  EXPECT_EQ(views[0].generation, 1u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2"));
  EXPECT_THAT(views[0].change_reason, HasSubstr("formed with w0, w1, w2"));
  EXPECT_EQ(membership_.counters().membership_changes, 1u);
}

TEST_F(ElasticMembershipTest, FewerThanMinWorldSizeNeverForm) {
  MustJoin("w0");
  Pass(absl::Seconds(20));
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_THAT(Published(), IsEmpty());
  EXPECT_THAT(membership_.view().dissolved_reason, HasSubstr("waiting for 2..4 workers"));
}

TEST_F(ElasticMembershipTest, ViewMembersCarryTheirIncarnations) {
  FormRingOfFour();
  for (const ViewMember& m : membership_.view().members) {
    EXPECT_EQ(m.incarnation, incarnations_[m.worker_id]) << m.worker_id;
  }
}

// --- Eviction and re-form ----------------------------------------------------------

TEST_F(ElasticMembershipTest, AClosedWatchEvictsAtOnceAndTheSurvivorsReformRankedById) {
  FormRingOfFour();
  membership_.WatchClosed("w1", tokens_["w1"], now_);
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].generation, 2u);
  ASSERT_TRUE(views[0].formed());
  EXPECT_EQ(views[0].dissolved_reason, "") << "a formed view has no dissolved reason";
  EXPECT_THAT(views[0].change_reason,
              AllOf(HasSubstr("worker w1 (rank 1) closed its WatchRing stream"),
                    HasSubstr("re-formed with 3 workers")));
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w2", "w3"));
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(views[0].members[rank].rank, rank);
  EXPECT_EQ(membership_.counters().evictions.at("watch_closed"), 1u);
}

TEST_F(ElasticMembershipTest, AMemberSilentForItsLeaseIsEvictedAndTheRingReforms) {
  FormRingOfFour();
  Pass(kLease - absl::Milliseconds(100), {"w3"});
  EXPECT_EQ(membership_.view().generation, 1u) << "within its lease";
  Pass(absl::Milliseconds(100), {"w3"});
  EXPECT_EQ(membership_.view().generation, 2u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2"));
  EXPECT_THAT(membership_.view().change_reason,
              HasSubstr("worker w3 (rank 3) missed heartbeats for 5s"));
  EXPECT_EQ(membership_.counters().evictions.at("heartbeat_timeout"), 1u);
}

TEST_F(ElasticMembershipTest, MembersLostTogetherCostOneReform) {
  FormRingOfFour();
  Pass(kLease, {"w1", "w2"});
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w3"));
  EXPECT_THAT(views[0].change_reason, AllOf(HasSubstr("w1 (rank 1)"), HasSubstr("w2 (rank 2)")));
}

TEST_F(ElasticMembershipTest, BelowMinWorldSizeTheRingDissolvesNamingWhoWasLost) {
  FormRingOfFour();
  ASSERT_TRUE(membership_.Leave("w0", tokens_["w0"], "done", now_).ok());
  ASSERT_TRUE(membership_.Leave("w1", tokens_["w1"], "done", now_).ok());
  ASSERT_EQ(MemberIds(), (std::vector<std::string>{"w2", "w3"}));
  ASSERT_TRUE(membership_.Leave("w2", tokens_["w2"], "done", now_).ok());
  EXPECT_FALSE(membership_.view().formed());
  EXPECT_EQ(membership_.view().dissolved_reason, "worker w2 (rank 0) left: done");
  EXPECT_EQ(membership_.counters().evictions.at("left"), 3u);
  for (const WorkerSnapshot& w : membership_.Workers(now_)) EXPECT_EQ(w.rank, -1);
}

// --- Admission -----------------------------------------------------------------------

TEST_F(ElasticMembershipTest, ANewcomerIsAdmittedAfterTheGraceWithoutFurtherJoins) {
  FormRingOfFour();
  ASSERT_TRUE(membership_.Leave("w3", tokens_["w3"], "", now_).ok());
  ASSERT_TRUE(membership_.Leave("w2", tokens_["w2"], "", now_).ok());
  Published();
  MustJoin("w9");
  Pass(kGrace - absl::Milliseconds(100));
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1")) << "still within the grace";
  Pass(absl::Milliseconds(100));
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w9"));
  EXPECT_THAT(membership_.view().change_reason, HasSubstr("admitted w9"));
  EXPECT_EQ(Published().size(), 1u);
}

TEST_F(ElasticMembershipTest, AJoinThatFillsTheRingIsAdmittedAtOnce) {
  FormRingOfFour();
  ASSERT_TRUE(membership_.Leave("w3", tokens_["w3"], "", now_).ok());
  MustJoin("w3");
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2", "w3"));
  EXPECT_EQ(membership_.view().generation, 3u);
}

class WideElasticMembershipTest : public ElasticMembershipTest {
 protected:
  WideElasticMembershipTest() : ElasticMembershipTest(Elastic(2, 8)) {}
};

TEST_F(WideElasticMembershipTest, ArrivalsCloseTogetherAreAdmittedInOneReform) {
  MustJoin("w0");
  MustJoin("w1");
  Pass(kGrace);
  ASSERT_THAT(MemberIds(), ElementsAre("w0", "w1"));
  Published();
  MustJoin("w2");
  Pass(absl::Milliseconds(500));
  MustJoin("w3");
  Pass(absl::Milliseconds(500));
  MustJoin("w4");
  Pass(kGrace);
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2", "w3", "w4"));
  EXPECT_THAT(views[0].change_reason, HasSubstr("admitted w2, w3, w4"));
}

TEST_F(ElasticMembershipTest, AJoinBeyondMaxWorldSizeIsRefusedNamingTheFlags) {
  FormRingOfFour();
  absl::StatusOr<uint64_t> fifth = Join(Info("w4"));
  EXPECT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fifth.status().message(),
              AllOf(HasSubstr("4 of 4"), HasSubstr("--max_world_size")));
}

// --- Incarnations --------------------------------------------------------------------

TEST_F(ElasticMembershipTest, ARestartedProcessReplacesItsQuietSessionWithoutWaitingForTheLease) {
  FormRingOfFour();
  const uint64_t old_token = tokens_["w2"];
  const uint64_t old_incarnation = incarnations_["w2"];
  Pass(2 * kInterval + absl::Milliseconds(100), {"w2"});  // killed: its heartbeats stop
  ASSERT_TRUE(Join(Restarted("w2")).ok());
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u) << "one re-form: the old session out, the new one in";
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2", "w3"));
  EXPECT_EQ(views[0].members[2].incarnation, incarnations_["w2"]);
  EXPECT_THAT(views[0].change_reason,
              AllOf(HasSubstr("worker w2 (rank 2) was replaced by its restarted process"),
                    HasSubstr(absl::StrCat(old_incarnation))));
  EXPECT_EQ(membership_.counters().evictions.at("restarted"), 1u);
  HeartbeatReport stale;
  stale.worker_id = "w2";
  stale.session_token = old_token;
  EXPECT_EQ(membership_.Heartbeat(stale, now_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ElasticMembershipTest, ASecondDaemonWithALiveIdIsRefusedNamingBothIncarnations) {
  FormRingOfFour();
  Pass(kInterval);  // w2 heartbeats on schedule
  JoinInfo duplicate = Restarted("w2");
  duplicate.peer_address = "other.test:7500";
  absl::StatusOr<uint64_t> refused = Join(duplicate);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("already live as incarnation 102"),
                    HasSubstr(absl::StrCat("incarnation ", duplicate.incarnation)),
                    HasSubstr("other.test:7500"), HasSubstr("unique --worker_id")));
  EXPECT_EQ(membership_.view().generation, 1u) << "the ring is undisturbed";
}

TEST_F(ElasticMembershipTest, TheSameIncarnationTwiceIsRefusedEvenWhenQuiet) {
  FormRingOfFour();
  Pass(3 * kInterval, {"w2"});
  EXPECT_EQ(Join(Info("w2")).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ElasticMembershipTest, IncarnationZeroIsRefused) {
  JoinInfo info = Info("w0");
  info.incarnation = 0;
  absl::StatusOr<uint64_t> token = Join(info);
  EXPECT_TRUE(absl::IsInvalidArgument(token.status()));
  EXPECT_THAT(token.status().message(), HasSubstr("incarnation"));
}

// --- A restarted coordinator adopts its workers' ring ---------------------------------

// The ring of generation 7 the workers were in before the coordinator restarted.
View RingOfGeneration7(const std::map<std::string, uint64_t>& incarnations) {
  View view;
  view.generation = 7;
  int rank = 0;
  for (const char* id : {"w0", "w1", "w2", "w3"}) {
    view.members.push_back(
        ViewMember{rank++, id, absl::StrCat(id, ".test:7500"), incarnations.at(id)});
  }
  return view;
}

class AdoptionTest : public ElasticMembershipTest {
 protected:
  AdoptionTest() {
    for (const char* id : {"w0", "w1", "w2", "w3"}) Info(id);  // their incarnations
    ring_ = RingOfGeneration7(incarnations_);
  }

  JoinInfo Rejoining(const std::string& id) {
    JoinInfo info = Info(id);
    info.last_generation = ring_.generation;
    info.current_view = ring_;
    return info;
  }

  View ring_;
};

TEST_F(AdoptionTest, WhenEveryMemberRejoinsReportingTheSameViewItIsAdoptedUnchanged) {
  for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  Pass(kGrace * 2);
  EXPECT_FALSE(membership_.view().formed()) << "waits for the last member, not the grace";
  ASSERT_TRUE(Join(Rejoining("w3")).ok());
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].generation, 7u) << "the same generation: workers resume, not re-form";
  EXPECT_EQ(views[0].members, ring_.members);
  EXPECT_THAT(views[0].change_reason, HasSubstr("adopted"));
  EXPECT_EQ(membership_.counters().views_adopted, 1u);
  EXPECT_EQ(membership_.counters().membership_changes, 0u);
  // Later changes count on from there.
  ASSERT_TRUE(membership_.Leave("w3", tokens_["w3"], "", now_).ok());
  EXPECT_EQ(membership_.view().generation, 8u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2"));
}

TEST_F(AdoptionTest, AMemberNotBackWithinALeaseMeansARingFormedAboveEveryGeneration) {
  for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  Pass(kLease);
  std::vector<View> views = Published();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].generation, 8u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2"));
  EXPECT_EQ(membership_.counters().views_adopted, 0u);
}

TEST_F(AdoptionTest, ContradictingReportsFormAboveEveryGenerationAtOnce) {
  for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  JoinInfo odd = Rejoining("w3");
  odd.current_view.members[0].peer_address = "elsewhere.test:7500";
  ASSERT_TRUE(Join(odd).ok());
  EXPECT_EQ(membership_.view().generation, 8u) << "the ring is full: no grace";
  EXPECT_EQ(membership_.counters().views_adopted, 0u);
}

TEST_F(AdoptionTest, ARestartedMemberIsNotTheOneInTheViewSoTheRingFormsAnew) {
  for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  ASSERT_TRUE(Join(Restarted("w3")).ok());  // new incarnation, no view
  EXPECT_EQ(membership_.view().generation, 8u);
  EXPECT_EQ(membership_.view().members[3].incarnation, incarnations_["w3"]);
}

TEST_F(AdoptionTest, AWorkerThatSawANewerGenerationPreventsAdoption) {
  JoinInfo newer = Rejoining("w0");
  newer.last_generation = 9;  // it saw the ring dissolve after generation 7
  ASSERT_TRUE(Join(newer).ok());
  for (const char* id : {"w1", "w2", "w3"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  EXPECT_EQ(membership_.view().generation, 10u);
}

TEST_F(AdoptionTest, ANewcomerDoesNotPreventAdoptionAndIsAdmittedAfterIt) {
  AdoptionTest::ring_.members.pop_back();  // the ring was w0..w2
  ASSERT_TRUE(Join(Info("w3")).ok());     // a newcomer, in no ring yet
  for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(Join(Rejoining(id)).ok());
  EXPECT_EQ(membership_.view().generation, 7u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2"));
  Pass(kGrace);
  EXPECT_EQ(membership_.view().generation, 8u);
  EXPECT_THAT(MemberIds(), ElementsAre("w0", "w1", "w2", "w3"));
}

TEST_F(AdoptionTest, AReportedViewIsValidatedLikeEveryOtherField) {
  JoinInfo bad_member = Rejoining("w0");
  bad_member.current_view.members[1].worker_id = "has space";
  EXPECT_TRUE(absl::IsInvalidArgument(Join(bad_member).status()));
  JoinInfo bad_rank = Rejoining("w0");
  bad_rank.current_view.members[1].rank = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(Join(bad_rank).status()));
  JoinInfo too_big = Rejoining("w0");
  too_big.current_view.members.resize(Membership::kMaxWorldSize + 1,
                                      too_big.current_view.members[0]);
  EXPECT_THAT(Join(too_big).status().message(), HasSubstr("at most 1024"));
  EXPECT_EQ(membership_.live_workers(), 0);
}

}  // namespace
}  // namespace ringsync
