// ElasticState over fake workers that really combine (FakeRing): commit, restore, and a
// Sync that gives every rank the newest committed state, starting again when the ring's
// membership changes under it.
#include "ringsync/elastic_state.h"

#include <memory>
#include <thread>
#include <vector>

#include "client/test/fake_worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringsync/client.h"
#include "ringsync/outcome.h"

namespace ringsync {
namespace {

using testing::FakeRing;
using testing::FakeWorker;

// One rank: its fake worker, its client, its state over one buffer of four floats.
struct Rank {
  std::unique_ptr<FakeWorker> worker;
  std::unique_ptr<Client> client;
  std::vector<float> weights = std::vector<float>(4, 0.0f);
  std::unique_ptr<ElasticState> state;
};

std::vector<Rank> StartRanks(FakeRing& ring) {
  std::vector<Rank> ranks(ring.world_size());
  for (int r = 0; r < ring.world_size(); ++r) {
    ranks[r].worker = std::make_unique<FakeWorker>();
    ranks[r].worker->JoinRing(&ring, r);
    ranks[r].worker->Start();
  }
  for (Rank& rank : ranks) {
    ClientOptions options;
    options.connect_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(rank.worker->unix_target(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    rank.client = *std::move(client);
    rank.state = std::make_unique<ElasticState>(*rank.client);
    rank.state->Register("weights", absl::MakeSpan(rank.weights));
  }
  return ranks;
}

// Every rank's Sync, at once, as every rank's training loop calls it.
std::vector<absl::Status> SyncAll(std::vector<Rank>& ranks) {
  std::vector<absl::Status> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = ranks[r].state->Sync(); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(ElasticState, RestoreGoesBackToTheLastCommitAndWithoutOneDoesNothing) {
  FakeRing ring(1);
  std::vector<Rank> ranks = StartRanks(ring);
  ASSERT_EQ(ranks.size(), 1u);
  ElasticState& state = *ranks[0].state;
  ranks[0].weights = {1, 2, 3, 4};
  state.Restore();
  EXPECT_EQ(ranks[0].weights, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FALSE(state.has_commit());
  state.set_step(3);
  state.Commit();
  ranks[0].weights = {9, 9, 9, 9};
  state.set_step(4);
  state.Restore();
  EXPECT_EQ(ranks[0].weights, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(state.step(), 3u);
}

TEST(ElasticState, SyncGivesEveryRankTheNewestCommitOfTheLowestRankHoldingIt) {
  FakeRing ring(3);
  std::vector<Rank> ranks = StartRanks(ring);
  ASSERT_EQ(ranks.size(), 3u);
  // Rank 0 was just admitted: no commit. Ranks 1 and 2 survived with step 7, and went on
  // past their commit before the change interrupted them.
  for (int r : {1, 2}) {
    ranks[r].weights.assign(4, static_cast<float>(r));
    ranks[r].state->set_step(7);
    ranks[r].state->Commit();
    ranks[r].weights.assign(4, 99.0f);
  }
  for (const absl::Status& s : SyncAll(ranks)) EXPECT_TRUE(s.ok()) << s;
  for (Rank& rank : ranks) {
    EXPECT_EQ(rank.weights, std::vector<float>(4, 1.0f)) << "rank 1's commit, on every rank";
    EXPECT_EQ(rank.state->step(), 7u);
    EXPECT_TRUE(rank.state->has_commit()) << "what Sync agreed on is committed";
  }
}

TEST(ElasticState, WithoutAnyCommitRankZerosStateIsTheState) {
  FakeRing ring(2);
  std::vector<Rank> ranks = StartRanks(ring);
  ASSERT_EQ(ranks.size(), 2u);
  ranks[0].weights = {1, 2, 3, 4};
  ranks[0].state->set_step(2);
  ranks[1].weights = {5, 6, 7, 8};
  for (const absl::Status& s : SyncAll(ranks)) EXPECT_TRUE(s.ok()) << s;
  for (Rank& rank : ranks) {
    EXPECT_EQ(rank.weights, (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(rank.state->step(), 2u);
  }
}

TEST(ElasticState, SyncStartsAgainOnTheNewMembershipWhenItChangesDuringSync) {
  FakeRing ring(1);
  std::vector<Rank> ranks = StartRanks(ring);
  ASSERT_EQ(ranks.size(), 1u);
  ranks[0].worker->FailNextForMembershipChange("ringsync.elastic/step", 5);
  ranks[0].weights = {1, 2, 3, 4};
  ranks[0].state->Commit();
  EXPECT_TRUE(ranks[0].state->Sync().ok());
  EXPECT_EQ(ranks[0].state->sync_restarts(), 1);
  std::vector<uint64_t> memberships;
  for (const testing::SeenRequest& seen : ranks[0].worker->seen()) {
    if (seen.request.spec().name() == "ringsync.elastic/step") {
      memberships.push_back(seen.request.membership());
    }
  }
  EXPECT_EQ(memberships, (std::vector<uint64_t>{0, 5}))
      << "after the failure, the client's collectives name the new membership";
}

}  // namespace
}  // namespace ringsync
