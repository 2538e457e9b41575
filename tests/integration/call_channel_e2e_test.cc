// End to end: the call channel. On a unix socket the SDK sends its collectives to the
// worker as records in shared memory (ClientOptions::call_channel, the default) instead of
// one RPC each. What must hold: a collective whose ranks use different paths gives every
// rank the same result; failures come back through the channel exactly as through the
// RPC (same code, same message naming the ranks); a call too large for the channel takes
// its RPC; calls in flight fail promptly, naming the lost worker, when it dies.
#include <signal.h>

#include <string>
#include <vector>

#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;
using ::testing::HasSubstr;

// Ranks 0 and 2 through the channel, rank 1 through RPCs; rank 0 sends every tensor
// inline, so its large ones are too large for a channel record and take their RPC.
std::vector<std::unique_ptr<Client>> ConnectMixed(LocalCluster& cluster) {
  std::vector<std::unique_ptr<Client>> clients(3);
  for (int r = 0; r < 3; ++r) {
    ClientOptions options;
    options.connect_timeout = absl::Seconds(30);
    options.client_name = absl::StrCat("test rank ", r);
    options.call_channel = r != 1;
    if (r == 0) options.shared_memory_threshold_bytes = SIZE_MAX;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(cluster.worker_target(r), options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (client.ok()) clients[r] = *std::move(client);
  }
  return clients;
}

TEST(CallChannel, RanksOnEitherPathGetTheSameResultsOfEveryCollective) {
  auto cluster = StartCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectMixed(*cluster);
  // Sizes inline in a record, near its limit (800 KB), and past it (1.6 MB: rank 0's
  // inline call takes its RPC, rank 2's is staged in registered memory).
  for (size_t count : {size_t{1}, size_t{1000}, size_t{200'000}, size_t{400'000}}) {
    SCOPED_TRACE(absl::StrCat(count, " floats"));
    std::vector<std::vector<float>> data(3, std::vector<float>(count));
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
      for (size_t i = 0; i < count; ++i) data[r][i] = static_cast<float>((i % 11) + r);
      return client.AllReduce("sum", absl::MakeSpan(data[r]), ReduceOp::kSum);
    }));
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(data[r][count - 1], 3.0f * static_cast<float>((count - 1) % 11) + 3.0f);
    }
  }
  std::vector<std::vector<int32_t>> gathered(3, std::vector<int32_t>(3 * 5));
  std::vector<std::vector<int32_t>> root(3, std::vector<int32_t>(5));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    std::vector<int32_t> mine(5, r * 10);
    if (absl::Status s = client.AllGather("gather", absl::MakeConstSpan(mine),
                                          absl::MakeSpan(gathered[r]));
        !s.ok()) {
      return s;
    }
    if (r == 2) root[r].assign(5, 42);
    if (absl::Status s = client.Broadcast("bcast", absl::MakeSpan(root[r]), /*root=*/2); !s.ok()) {
      return s;
    }
    return client.Barrier("barrier");
  }));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(gathered[r][0], 0);
    EXPECT_EQ(gathered[r][5], 10);
    EXPECT_EQ(gathered[r][14], 20);
    EXPECT_EQ(root[r][4], 42);
  }
}

TEST(CallChannel, AFailureComesBackAsThroughTheRpcNamingTheRanks) {
  auto cluster = StartCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectMixed(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<float> data(r == 2 ? 8 : 9, 1.0f);
    return client.AllReduce("mismatch", absl::MakeSpan(data), ReduceOp::kSum);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("8 x float32")) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("9 x float32")) << statuses[r];
  }
  // Channel (rank 0) and RPC (rank 1) say it with the same code.
  EXPECT_EQ(statuses[0].code(), statuses[1].code());
  // The ring goes on.
  ExpectAllOk(OnEveryRank(clients, [&](int, Client& client) {
    std::vector<float> data(4, 1.0f);
    return client.AllReduce("after", absl::MakeSpan(data), ReduceOp::kSum);
  }));
}

TEST(CallChannel, ACallInFlightFailsPromptlyNamingTheWorkerWhenItDies) {
  auto cluster = StartCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectMixed(*cluster);
  // Rank 0 waits in the channel for ranks that never call; its worker is killed.
  std::vector<float> data(4, 1.0f);
  CollectiveHandle pending = clients[0]->AllReduceAsync("stranded", absl::MakeSpan(data),
                                                        ReduceOp::kSum);
  absl::SleepFor(absl::Milliseconds(300));
  cluster->worker(0).Signal(SIGKILL);
  const SteadyStopwatch start;
  const absl::Status status = pending.Wait(absl::Seconds(30));
  EXPECT_LT(start.Elapsed(), absl::Seconds(15));
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("lost the worker")) << status;
}

TEST(CallChannel, ACallInFlightWhenItsClientIsDestroyedEndsCancelledAndTheRingFailsAlike) {
  auto cluster = StartCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectMixed(*cluster);
  std::vector<std::vector<float>> data(3, std::vector<float>(4, 1.0f));
  // Rank 0 (channel) waits for the others; rank 2 (channel) never calls; rank 1 (RPC) does.
  CollectiveHandle stranded =
      clients[0]->AllReduceAsync("left", absl::MakeSpan(data[0]), ReduceOp::kSum);
  CollectiveHandle other =
      clients[1]->AllReduceAsync("left", absl::MakeSpan(data[1]), ReduceOp::kSum);
  absl::SleepFor(absl::Milliseconds(300));
  const SteadyStopwatch start;
  clients[0].reset();  // no goodbye for the call in flight
  const absl::Status mine = stranded.Wait(absl::Seconds(30));
  EXPECT_TRUE(absl::IsCancelled(mine)) << mine;
  EXPECT_THAT(std::string(mine.message()), HasSubstr("Client was destroyed")) << mine;
  const absl::Status theirs = other.Wait(absl::Seconds(60));
  // Aborted by rank 0's worker when its client went, as a cancelled RPC is: not at the
  // collective's 60 s deadline.
  EXPECT_LT(start.Elapsed(), absl::Seconds(20));
  EXPECT_FALSE(theirs.ok());
  EXPECT_THAT(std::string(theirs.message()), HasSubstr("rank 0")) << theirs;
}

}  // namespace
}  // namespace ringsync
