// End to end, the training loop's side of elastic membership: real ringsyncd processes,
// SDK clients as training processes with an ElasticState each. A worker killed with
// SIGKILL fails the survivors' collectives marked membership changed (their buffers
// untouched); ElasticState::Sync puts every rank of the next ring on the newest committed
// state — a restarted worker's training process, which has none, receives it — and the
// next all-reduce over that ring is exact.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/sync/steady_deadline.h"
#include "gmock/gmock.h"
#include "ringsync/elastic_state.h"
#include "ringsync/outcome.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

using testing::ConnectAll;

constexpr int kWorld = 4;
constexpr int kVictim = 2;
constexpr size_t kCount = 1000;
// Timers at 100 ms scale, so that a loss is noticed and the ring re-forms in about a
// second; every wait below is bounded.
const std::vector<std::string> kWorkerFlags = {"--collective_timeout=10s"};
const std::vector<std::string> kCoordinatorFlags = {"--heartbeat_interval=100ms",
                                                    "--heartbeat_timeout=600ms"};
constexpr absl::Duration kBound = absl::Seconds(30);

std::unique_ptr<LocalCluster> StartRing(int min_world_size) {
  LocalClusterOptions options;
  options.security = ClusterSecurity::kToken;
  options.world_size = kWorld;
  options.min_world_size = min_world_size;
  options.ringsyncd = RINGSYNCD_PATH;
  options.worker_flags = kWorkerFlags;
  options.coordinator_flags = kCoordinatorFlags;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// One training process: its client and its state (weights and a step counter).
struct Trainer {
  std::unique_ptr<Client> client;
  std::vector<double> weights = std::vector<double>(kCount, 0.0);
  std::unique_ptr<ElasticState> state;
};

void Attach(Trainer& t, std::unique_ptr<Client> client) {
  t.client = std::move(client);
  t.state = std::make_unique<ElasticState>(*t.client);
  t.state->Register("weights", absl::MakeSpan(t.weights));
}

std::unique_ptr<Client> ConnectTo(LocalCluster& cluster, int i) {
  ClientOptions options;
  options.connect_timeout = kBound;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(cluster.worker_target(i), options);
  EXPECT_TRUE(client.ok()) << "worker " << i << ": " << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// Every present trainer's Sync, at once.
std::vector<absl::Status> SyncAll(std::vector<Trainer*> trainers) {
  std::vector<absl::Status> results(trainers.size());
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < trainers.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = trainers[i]->state->Sync(); });
    }
  }
  return results;
}

// An all-reduce (SUM) of every trainer's rank + 1, checked exact on every rank.
void ExpectExactSumOver(std::vector<Trainer*> trainers, const std::string& name) {
  const int n = static_cast<int>(trainers.size());
  std::vector<absl::Status> results(trainers.size());
  std::vector<std::vector<double>> values(trainers.size());
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        Client& c = *trainers[i]->client;
        values[i].assign(kCount, c.rank() + 1.0);
        results[i] = c.AllReduce(name, absl::MakeSpan(values[i]), ReduceOp::kSum);
      });
    }
  }
  const double expected = n * (n + 1) / 2.0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(results[i].ok()) << "trainer " << i << ": " << results[i];
    EXPECT_EQ(trainers[i]->client->world_size(), n);
    EXPECT_EQ(values[i], std::vector<double>(kCount, expected)) << "trainer " << i;
  }
}

// Issues all-reduces on a survivor until one fails marked membership changed (bounded);
// every failure leaves the buffer as it was.
absl::Status AwaitMembershipChange(Trainer& t) {
  absl::Status last;
  for (const SteadyDeadline until(kBound); !until.Passed();) {
    std::vector<double> grad(kCount, 1.0);
    last = t.client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
    if (last.ok()) continue;  // not yet noticed: the ring ran it
    if (grad != std::vector<double>(kCount, 1.0)) {
      return absl::InternalError(absl::StrCat("a failed collective changed the buffer: ", last.message()));
    }
    if (IsMembershipChanged(last)) return last;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("no membership-changed failure; last: ", last.message()));
}

// Starts a ring, syncs and commits step 1 with weights of rank 0, then kills the victim's
// worker (and drops its trainer); returns the survivors' view of that.
class ElasticLoop : public ::testing::Test {
 protected:
  void StartAndCommit(int min_world_size) {
    cluster_ = StartRing(min_world_size);
    ASSERT_NE(cluster_, nullptr);
    std::vector<std::unique_ptr<Client>> clients = ConnectAll(*cluster_);
    for (int i = 0; i < kWorld; ++i) {
      ASSERT_NE(clients[i], nullptr);
      Attach(trainers_[i], std::move(clients[i]));
      trainers_[i].weights.assign(kCount, 10.0 * (i + 1));  // only rank 0's survives Sync
    }
    for (const absl::Status& s : SyncAll(All())) ASSERT_TRUE(s.ok()) << s;
    for (Trainer& t : trainers_) {
      ASSERT_EQ(t.weights, std::vector<double>(kCount, 10.0));
      t.weights.assign(kCount, 42.0);  // "a step"
      t.state->set_step(1);
      t.state->Commit();
    }
  }

  void KillVictim() {
    cluster_->worker(kVictim).Signal(SIGKILL);
    trainers_[kVictim] = Trainer{};  // its training process dies with it
  }

  // The survivors each see a membership-changed failure.
  void ExpectSurvivorsToldOfTheChange() {
    std::vector<absl::Status> told(kWorld);
    {
      std::vector<std::jthread> threads;
      for (int i : Survivors()) threads.emplace_back([&, i] { told[i] = AwaitMembershipChange(trainers_[i]); });
    }
    for (int i : Survivors()) {
      EXPECT_TRUE(IsMembershipChanged(told[i])) << "trainer " << i << ": " << told[i];
      // Its code is ABORTED when it never ran; in flight, the code of the break the change
      // caused (UNAVAILABLE, or DEADLINE_EXCEEDED for a ring stream that found no answer):
      // a training loop reads the mark, not the code.
      EXPECT_THAT(std::string(told[i].message()), ::testing::HasSubstr("membership changed"));
    }
  }

  std::vector<int> Survivors() const { return {0, 1, 3}; }
  std::vector<Trainer*> All() {
    std::vector<Trainer*> all;
    for (Trainer& t : trainers_) all.push_back(&t);
    return all;
  }
  std::vector<Trainer*> SurvivingTrainers() {
    std::vector<Trainer*> some;
    for (int i : Survivors()) some.push_back(&trainers_[i]);
    return some;
  }

  // The victim's worker back, with a new training process that has no state.
  void RestartVictim() {
    ASSERT_TRUE(cluster_->RestartWorker(kVictim).ok());
    std::unique_ptr<Client> client = ConnectTo(*cluster_, kVictim);
    ASSERT_NE(client, nullptr);
    Attach(trainers_[kVictim], std::move(client));
  }

  void ExpectEveryoneOnTheCommittedState(const std::vector<Trainer*>& trainers) {
    for (Trainer* t : trainers) {
      EXPECT_EQ(t->state->step(), 1u);
      EXPECT_EQ(t->weights, std::vector<double>(kCount, 42.0)) << "the survivors' commit";
    }
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::vector<Trainer> trainers_ = std::vector<Trainer>(kWorld);
};

TEST_F(ElasticLoop, AFixedRingsRestartedWorkerIsAMembershipChangeAndSyncGivesItTheState) {
  StartAndCommit(/*min_world_size=*/0);
  if (HasFatalFailure()) return;
  KillVictim();
  ExpectSurvivorsToldOfTheChange();
  // Survivors work past their commit, then roll back, as their loop does on the change.
  for (int i : Survivors()) {
    trainers_[i].weights.assign(kCount, -1.0);
    trainers_[i].state->Restore();
  }
  RestartVictim();
  if (HasFatalFailure()) return;
  for (const absl::Status& s : SyncAll(All())) ASSERT_TRUE(s.ok()) << s;
  ExpectEveryoneOnTheCommittedState(All());
  ExpectExactSumOver(All(), "after-restart");
}

TEST_F(ElasticLoop, AnElasticRingGoesOnWithThreeExactlyAndTakesTheRestartedWorkerBack) {
  if (!LocalCluster::CoordinatorIsElastic(RINGSYNCD_PATH)) {
    GTEST_SKIP() << "needs a coordinator with --min_world_size (elastic re-form)";
  }
  StartAndCommit(/*min_world_size=*/3);
  if (HasFatalFailure()) return;
  KillVictim();
  ExpectSurvivorsToldOfTheChange();
  for (const absl::Status& s : SyncAll(SurvivingTrainers())) ASSERT_TRUE(s.ok()) << s;
  ExpectEveryoneOnTheCommittedState(SurvivingTrainers());
  ExpectExactSumOver(SurvivingTrainers(), "on-three");
  RestartVictim();
  if (HasFatalFailure()) return;
  // The survivors hear of the admission at their next collective; then all four sync.
  ExpectSurvivorsToldOfTheChange();
  for (const absl::Status& s : SyncAll(All())) ASSERT_TRUE(s.ok()) << s;
  ExpectEveryoneOnTheCommittedState(All());
  ExpectExactSumOver(All(), "on-four");
}

}  // namespace
}  // namespace ringsync
