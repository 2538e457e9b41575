// End to end: Client::ReduceScatter. What a sharded optimizer relies on: rank r gets block
// r of the ranks' inputs reduced, bitwise what an AllReduce gives there, whichever way the
// tensor reaches the worker; a call whose input is not one block per rank is refused on
// every rank, naming the sizes; a failed call leaves the output untouched.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/ring_test_data.h"
#include "gmock/gmock.h"
#include "ringsync/registered_buffer.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/worker_metric.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;
using ::testing::HasSubstr;

constexpr int kRanks = 3;

// Each rank's input of `block` x kRanks elements.
Bytes Input(DType dtype, size_t block, int rank) {
  return testing::RandomInput(dtype, block * kRanks, rank, 21);
}

TEST(ReduceScatterEndToEnd, EachRankGetsItsBlockBitwiseTheAllReducesThroughEveryPath) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  // 1 and 1,000 elements a block go below the shared-memory threshold (the arena, or
  // inline); 300,001 past it (a staging buffer, or a file).
  for (const testing::StagingPath& path : testing::StagingPaths()) {
    auto clients = ConnectAll(*cluster, -1, path.options);
    for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (const size_t block : {size_t{1}, size_t{1000}, size_t{300'001}}) {
        SCOPED_TRACE(absl::StrCat(path.name, ", ", DTypeName(dtype), ", block ", block));
        const size_t esize = DTypeSize(dtype);
        std::vector<Bytes> reduced(kRanks), scattered(kRanks);
        ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
          const Bytes input = Input(dtype, block, r);
          reduced[r] = input;
          if (absl::Status s = client.AllReduce("whole", reduced[r].data(), block * kRanks, dtype,
                                                ReduceOp::kAvg);
              !s.ok()) {
            return s;
          }
          scattered[r] = Bytes(block * esize, std::byte{0x5a});
          return client.ReduceScatter("shard", input.data(), block * kRanks, dtype,
                                      scattered[r].data(), block, ReduceOp::kAvg);
        }));
        for (int r = 0; r < kRanks; ++r) {
          const Bytes mine(reduced[r].begin() + r * block * esize,
                           reduced[r].begin() + (r + 1) * block * esize);
          EXPECT_TRUE(scattered[r] == mine) << "rank " << r;
        }
      }
    }
  }
}

TEST(ReduceScatterEndToEnd, TheOutputMayBeTheRanksOwnBlockOfTheInput) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  constexpr size_t kBlock = 400'000;  // past the shared-memory threshold
  std::vector<std::vector<float>> buffers(kRanks), expected(kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    buffers[r].assign(kBlock * kRanks, static_cast<float>(r + 1));
    expected[r] = buffers[r];
    for (size_t i = 0; i < kBlock; ++i) expected[r][r * kBlock + i] = 1 + 2 + 3;
    return client.ReduceScatter<float>(
        "in place", buffers[r], absl::MakeSpan(buffers[r]).subspan(r * kBlock, kBlock),
        ReduceOp::kSum);
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(buffers[r] == expected[r]) << "rank " << r << ": its block summed, the rest kept";
  }
}

// In a registered buffer the same form runs in place (NCCL's in-place reduce-scatter):
// nothing is staged, the block is bitwise the plain call's, and the rest of the input is
// the ring's scratch. A registered input with its output elsewhere is copied as before,
// and keeps the input.
TEST(ReduceScatterEndToEnd, TheInPlaceFormInARegisteredInputRunsThereBitwiseThePlainOne) {
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&] {
    return testing::WorkerMetric(*cluster, 0, "ringsync_registered_bytes").value_or(-1);
  };
  constexpr size_t kBlock = 400'000;
  std::vector<RegisteredBuffer> buffers(kRanks);
  std::vector<Bytes> plain(kRanks), kept(kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    absl::StatusOr<RegisteredBuffer> buffer = client.Allocate<float>(kBlock * kRanks);
    if (!buffer.ok()) return buffer.status();
    buffers[r] = *std::move(buffer);
    const Bytes input = Input(DType::kFloat32, kBlock, r);
    plain[r] = Bytes(kBlock * sizeof(float));
    absl::Status s = client.ReduceScatter("plain", input.data(), kBlock * kRanks,
                                          DType::kFloat32, plain[r].data(), kBlock,
                                          ReduceOp::kSum);
    client.ReleaseIdleMemory();  // the staging buffer it took: a second would show
    return s;
  }));
  const double before = registered_bytes();
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    const Bytes input = Input(DType::kFloat32, kBlock, r);
    auto* data = static_cast<std::byte*>(buffers[r].data());
    std::memcpy(data, input.data(), input.size());
    return client.ReduceScatter("in place", data, kBlock * kRanks, DType::kFloat32,
                                data + r * kBlock * sizeof(float), kBlock, ReduceOp::kSum);
  }));
  EXPECT_EQ(registered_bytes(), before) << "nothing staged";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(buffers[r].data()) +
                              r * kBlock * sizeof(float),
                          plain[r].data(), plain[r].size()),
              0)
        << "rank " << r;
  }

  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    const Bytes input = Input(DType::kFloat32, kBlock, r);
    std::memcpy(buffers[r].data(), input.data(), input.size());
    kept[r] = Bytes(kBlock * sizeof(float));
    return client.ReduceScatter("apart", buffers[r].data(), kBlock * kRanks, DType::kFloat32,
                                kept[r].data(), kBlock, ReduceOp::kSum);
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(kept[r], plain[r]) << "rank " << r;
    EXPECT_EQ(std::memcmp(buffers[r].data(), Input(DType::kFloat32, kBlock, r).data(),
                          kBlock * kRanks * sizeof(float)),
              0)
        << "rank " << r << "'s input was kept";
  }
}

TEST(ReduceScatterEndToEnd, AnInputThatIsNotOneBlockPerRankIsRefusedOnEveryRank) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<float> input(10, 1.0f), output(3, -1.0f);
    // Rank 1 miscounts its input; the others call correctly and hear of it.
    const size_t input_count = r == 1 ? 10 : 9;
    absl::Status s = client.ReduceScatter("shard", input.data(), input_count, DType::kFloat32,
                                          output.data(), 3, ReduceOp::kSum);
    EXPECT_EQ(output, std::vector<float>(3, -1.0f)) << "rank " << r << "'s output is untouched";
    return s;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
  EXPECT_THAT(std::string(statuses[1].message()),
              HasSubstr("the input holds 10 elements, which is not one block for each of this "
                        "ring's 3 ranks"));
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("rank 1"))
      << "the others are told which rank refused";

  // The ring serves the next call.
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<int32_t> input(kRanks, r), output(1);
    return client.ReduceScatter<int32_t>("next", input, absl::MakeSpan(output), ReduceOp::kSum);
  }));
}

}  // namespace
}  // namespace ringsync
