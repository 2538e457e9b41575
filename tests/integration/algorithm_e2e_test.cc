// End to end: the all-reduce algorithms (--algorithm, --relay_max_bytes,
// --doubling_max_bytes, --direct_max_ranks) on real workers. Whatever algorithm a cluster runs, every rank's
// result is bitwise the ring's.
#include <random>

#include "absl/strings/match.h"
#include "core/sync/steady_deadline.h"
#include "core/testing/ring_test_data.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/http_get.h"
#include "tests/integration/run_daemon.h"
#include "tests/integration/worker_metric.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::ConnectAll;
using testing::HttpGet;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::RunDaemon;
using testing::StartCluster;

struct Case {
  DType dtype;
  ReduceOp op;
  size_t count;
};

// Every dtype x op on random (not exactly summable) inputs; results per case and rank.
// `scrape` (optional) sees the cluster after the last case.
std::vector<std::vector<Bytes>> RunEveryCase(
    const std::vector<std::string>& worker_flags, const std::vector<Case>& cases,
    int ranks = 4, const std::function<void(LocalCluster&)>& scrape = nullptr) {
  const int kRanks = ranks;
  auto cluster = StartCluster(kRanks, worker_flags, {}, /*http=*/scrape != nullptr);
  if (cluster == nullptr) return {};
  auto clients = ConnectAll(*cluster);
  std::vector<std::vector<Bytes>> results;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<Bytes> buffers;
    for (int r = 0; r < kRanks; ++r) {
      buffers.push_back(testing::RandomInput(c.dtype, c.count, r, static_cast<uint32_t>(i)));
    }
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
      return client.AllReduce(absl::StrCat("case", i), buffers[r].data(), c.count, c.dtype, c.op);
    }));
    results.push_back(std::move(buffers));
  }
  if (scrape) scrape(*cluster);
  return results;
}

// The stride algorithms' cases: four dtypes x every op on random sizes, an empty buffer,
// and one past --doubling_max_bytes (which runs the relay or the ring instead).
std::vector<Case> StrideAlgorithmCases(uint32_t seed) {
  std::vector<Case> cases;
  std::mt19937 rng(seed);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64}) {
    for (ReduceOp op : kAllReduceOps) cases.push_back({dtype, op, 1 + rng() % 300});
  }
  cases.push_back({DType::kFloat32, ReduceOp::kSum, 0});
  cases.push_back({DType::kFloat32, ReduceOp::kSum, 40000});
  return cases;
}

// Every case's result on every rank is bitwise the ring's.
void ExpectTheRingsResults(const std::vector<Case>& cases,
                           const std::vector<std::vector<Bytes>>& ring,
                           const std::vector<std::vector<Bytes>>& got, const std::string& what) {
  ASSERT_EQ(ring.size(), cases.size());
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(cases[i].count, " x ", DTypeName(cases[i].dtype), " ",
                              ReduceOpName(cases[i].op)));
    for (size_t r = 0; r < ring[i].size(); ++r) {
      EXPECT_TRUE(got[i][r] == ring[i][r]) << what << ": rank " << r << " differs";
    }
  }
}

TEST(Algorithms, RelayAndAutoGiveBitwiseTheRingsResultOnEveryRankForEveryDTypeAndOp) {
  std::vector<Case> cases;
  std::mt19937 rng(12);
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) cases.push_back({dtype, op, 1 + rng() % 300});
  }
  cases.push_back({DType::kFloat32, ReduceOp::kSum, 0});
  cases.push_back({DType::kFloat32, ReduceOp::kSum, 40000});  // auto: past the threshold
  const auto ring = RunEveryCase({"--algorithm=ring"}, cases);
  const auto relay = RunEveryCase({"--algorithm=relay"}, cases);
  const auto automatic = RunEveryCase({"--algorithm=auto", "--relay_max_bytes=1024"}, cases);
  // A relay frame holds the whole buffer and peers read no frame over a segment: forced
  // relay runs buffers larger than a segment on the ring (the 40,000-element case here).
  const auto small_frames = RunEveryCase({"--algorithm=relay", "--segment_bytes=4096"}, cases);
  ASSERT_EQ(ring.size(), cases.size());
  ASSERT_EQ(relay.size(), cases.size());
  ASSERT_EQ(automatic.size(), cases.size());
  ASSERT_EQ(small_frames.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(cases[i].count, " x ", DTypeName(cases[i].dtype), " ",
                              ReduceOpName(cases[i].op)));
    for (size_t r = 0; r < ring[i].size(); ++r) {
      EXPECT_TRUE(ring[i][r] == ring[i][0]) << "ring: rank " << r << " differs from rank 0";
      EXPECT_TRUE(relay[i][r] == ring[i][r]) << "relay: rank " << r << " differs from the ring";
      EXPECT_TRUE(automatic[i][r] == ring[i][r]) << "auto: rank " << r << " differs from the ring";
      EXPECT_TRUE(small_frames[i][r] == ring[i][r])
          << "relay with 4 KiB segments: rank " << r << " differs from the ring";
    }
  }
}

// The doubling's steps send to rank+1, +2, +4, ...: on 3 ranks its second step runs
// against the ring's direction, on 5 its last step carries one contribution of four.
TEST(Algorithms, TheDoublingGivesBitwiseTheRingsResultOnRingsThatAreNoPowerOfTwo) {
  const std::vector<Case> cases = StrideAlgorithmCases(13);
  for (int ranks : {3, 5}) {
    SCOPED_TRACE(absl::StrCat(ranks, " ranks"));
    const auto ring = RunEveryCase({"--algorithm=ring"}, cases, ranks);
    const auto doubling = RunEveryCase(
        {"--algorithm=doubling"}, cases, ranks, [ranks](LocalCluster& cluster) {
          // Links beyond the neighbours were connected on first use, and counted.
          const int strides = ranks == 3 ? 1 : 2;  // stride 2; strides 2 and 4
          for (int r = 0; r < ranks; ++r) {
            const std::string page =
                HttpGet(cluster.worker_http_address(r), "/metrics", cluster.http_token()).body;
            EXPECT_THAT(page, ::testing::HasSubstr(absl::StrCat("ringsync_stride_links_open ",
                                                                strides, "\n")));
            EXPECT_THAT(page, ::testing::HasSubstr(absl::StrCat(
                                  "ringsync_stride_links_connected_total ", strides, "\n")));
            EXPECT_THAT(page, ::testing::HasSubstr("algorithm=\"doubling\""));
          }
        });
    ExpectTheRingsResults(cases, ring, doubling, "doubling");
  }
}

TEST(Algorithms, AWorkerRefusesToStartWithAnAlgorithmFlagOutOfRangeNamingIt) {
  struct Case {
    const char* flag;
    const char* said;
  };
  for (const Case& c :
       {Case{"--algorithm=tree", "--algorithm must be auto, ring, relay, doubling or direct"},
        Case{"--direct_max_ranks=17", "--direct_max_ranks must be between 0 and 16"},
        Case{"--direct_max_ranks=-1", "--direct_max_ranks must be between 0 and 16"},
        Case{"--doubling_max_bytes=-1", "--doubling_max_bytes must be between 0 and 16 MiB"},
        Case{"--relay_max_bytes=16777217", "--relay_max_bytes must be between 0 and 16 MiB"}}) {
    const auto [exit_code, output] = RunDaemon("worker", {c.flag, "--coordinator=127.0.0.1:1"});
    EXPECT_EQ(exit_code, 2) << c.flag << ": " << output;
    EXPECT_THAT(output, ::testing::HasSubstr(c.said)) << c.flag << ": " << output;
  }
}

// The direct exchange sends to every other rank: auto runs it on 4 ranks (the default
// --direct_max_ranks), and forced on 5 it runs there too, over a link to every rank.
TEST(Algorithms, TheDirectExchangeGivesBitwiseTheRingsResultOverALinkToEveryRank) {
  const std::vector<Case> cases = StrideAlgorithmCases(14);
  for (const auto& [ranks, flag] : {std::pair<int, const char*>{4, "--algorithm=auto"},
                                    std::pair<int, const char*>{5, "--algorithm=direct"}}) {
    SCOPED_TRACE(absl::StrCat(ranks, " ranks, ", flag));
    const auto ring = RunEveryCase({"--algorithm=ring"}, cases, ranks);
    const auto direct = RunEveryCase({flag}, cases, ranks, [ranks](LocalCluster& cluster) {
      const int strides = ranks - 2;  // every stride but the ring link's
      for (int r = 0; r < ranks; ++r) {
        const std::string page =
            HttpGet(cluster.worker_http_address(r), "/metrics", cluster.http_token()).body;
        EXPECT_THAT(page, ::testing::HasSubstr(absl::StrCat("ringsync_stride_links_open ",
                                                            strides, "\n")));
        EXPECT_THAT(page, ::testing::HasSubstr("algorithm=\"direct\""));
        EXPECT_THAT(page, ::testing::Not(::testing::HasSubstr("algorithm=\"doubling\"")));
      }
    });
    ExpectTheRingsResults(cases, ring, direct, "direct");
  }
}

// A worker connects the links its small all-reduces use as soon as the ring forms (on 4
// ranks auto runs the direct exchange: strides 2 and 3), so the first one does not wait
// for connections; no collective has run here.
TEST(Algorithms, TheLinksOfTheSmallAllReducesAreConnectedOnceTheRingForms) {
  auto cluster = StartCluster(4, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    std::string page;
    for (const SteadyDeadline deadline(absl::Seconds(20)); !deadline.Passed();) {
      page = HttpGet(cluster->worker_http_address(r), "/metrics", cluster->http_token()).body;
      if (absl::StrContains(page, "ringsync_stride_links_open 2\n")) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_THAT(page, ::testing::HasSubstr("ringsync_stride_links_open 2\n"));
    EXPECT_THAT(page, ::testing::HasSubstr("ringsync_stride_links_connected_total 2\n"));
    EXPECT_THAT(page, ::testing::Not(::testing::HasSubstr("ringsync_allreduce_algorithm_total{")))
        << "no all-reduce ran";
  }
}

}  // namespace
}  // namespace ringsync

namespace ringsync {
namespace {

// A small broadcast, scatter, gather or all-gather runs over the same links (on 4 ranks
// the direct exchange: one hop) where the ring's chains take three: the root's data goes
// straight to each rank, so in a broadcast the other ranks send nothing. With
// --algorithm=ring they run the chain, where each rank but the last forwards the root's.
TEST(Algorithms, SmallCopyingCollectivesTakeOneHopOverTheStrideLinks) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1000;
  for (const char* flag : {"--algorithm=auto", "--algorithm=ring"}) {
    SCOPED_TRACE(flag);
    auto cluster = StartCluster(kRanks, {flag}, {}, /*http=*/true);
    ASSERT_NE(cluster, nullptr);
    auto clients = ConnectAll(*cluster);
    std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount, 0.0f));
    std::vector<float> gathered(kRanks * 2, -1.0f);
    data[0].assign(kCount, 7.0f);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      if (absl::Status s = client.Broadcast<float>("params", absl::MakeSpan(data[r]), 0);
          !s.ok()) {
        return s;
      }
      const std::vector<float> mine = {static_cast<float>(r), static_cast<float>(10 * r)};
      return client.Gather<float>(
          "ids", mine,
          r == 2 ? absl::MakeSpan(gathered) : absl::Span<float>(nullptr, gathered.size()), 2);
    }));
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(data[r], std::vector<float>(kCount, 7.0f)) << "rank " << r;
    }
    EXPECT_EQ(gathered, (std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30}));
    // Rank 1 (worker 1): in the chain it forwards the broadcast, 4 KB, and, the last hop
    // to the gather's root, sends its block and those of ranks 3 and 0 (3 x 8 bytes); in
    // the direct exchange it sends nothing of the broadcast, and its block to each rank.
    const bool ring = absl::string_view(flag) == "--algorithm=ring";
    const double sent =
        testing::WorkerMetric(*cluster, 1, "ringsync_ring_bytes_sent_total").value_or(-1);
    EXPECT_EQ(sent, (ring ? kCount * 4.0 : 0) + 3 * 8);
    // And the worker's metrics say which way each went.
    for (const char* kind : {"broadcast", "gather"}) {
      SCOPED_TRACE(kind);
      const std::string labels = absl::StrCat("algorithm=\"", ring ? "chain" : "direct",
                                              "\",kind=\"", kind, "\"");
      EXPECT_EQ(testing::WorkerMetric(*cluster, 1, "ringsync_collective_algorithm_total", labels)
                    .value_or(-1),
                1);
    }
  }
}

}  // namespace
}  // namespace ringsync

namespace ringsync {
namespace {

// A large scatter or gather goes straight between the root and each rank over the stride
// links, where the ring's chain passes each block along: the rank three hops from the
// root sends its block alone instead of three. With --algorithm=ring it runs the chain.
TEST(Algorithms, LargeScattersAndGathersGoStraightBetweenTheRootAndEachRank) {
  constexpr int kRanks = 4;
  constexpr int kRoot = 2;
  constexpr int kFar = 1;  // three hops after the root in the chain: 3 -> 0 -> 1 -> 2
  constexpr size_t kCount = 300'000;  // floats a rank: past the stride links' frames
  for (const char* flag : {"--algorithm=auto", "--algorithm=ring"}) {
    SCOPED_TRACE(flag);
    const bool ring = absl::string_view(flag) == "--algorithm=ring";
    auto cluster = StartCluster(kRanks, {flag}, {}, /*http=*/true);
    ASSERT_NE(cluster, nullptr);
    auto clients = ConnectAll(*cluster);
    std::vector<std::vector<float>> inputs, blocks(kRanks, std::vector<float>(kCount));
    for (int r = 0; r < kRanks; ++r) {
      inputs.push_back(std::vector<float>(kCount, static_cast<float>(r + 1)));
    }
    std::vector<float> gathered(kCount * kRanks, -1.0f);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      const absl::Span<float> out =
          r == kRoot ? absl::MakeSpan(gathered) : absl::Span<float>(nullptr, gathered.size());
      return client.Gather<float>("activations", inputs[r], out, kRoot);
    }));
    const double after_gather =
        testing::WorkerMetric(*cluster, kFar, "ringsync_ring_bytes_sent_total").value_or(-1);
    std::vector<float> all_blocks;
    for (const std::vector<float>& input : inputs) {
      all_blocks.insert(all_blocks.end(), input.begin(), input.end());
    }
    EXPECT_EQ(gathered, all_blocks);
    EXPECT_EQ(after_gather, (ring ? 3.0 : 1.0) * kCount * sizeof(float));
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      const absl::Span<const float> in =
          r == kRoot ? absl::MakeConstSpan(all_blocks)
                     : absl::Span<const float>(nullptr, all_blocks.size());
      return client.Scatter<float>("shards", in, absl::MakeSpan(blocks[r]), kRoot);
    }));
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(blocks[r], inputs[r]) << "rank " << r;
    for (const char* kind : {"scatter", "gather"}) {
      SCOPED_TRACE(kind);
      const std::string labels = absl::StrCat("algorithm=\"", ring ? "chain" : "direct",
                                              "\",kind=\"", kind, "\"");
      EXPECT_EQ(testing::WorkerMetric(*cluster, kFar, "ringsync_collective_algorithm_total",
                                      labels)
                    .value_or(-1),
                1);
    }
  }
}

}  // namespace
}  // namespace ringsync
