// End to end: Client::Scatter. Rank r gets block r of the root's input, whichever way the
// tensor reaches the worker, the other ranks passing no input at all; in a registered
// buffer the rank's own block of it runs in place; a root without an input, or ranks that
// disagree, fail every rank, and the ring serves the next call.
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

// The root's input of `block` x kRanks elements.
Bytes RootInput(DType dtype, size_t block) {
  return testing::RandomInput(dtype, block * kRanks, 7, 23);
}

Bytes BlockOf(const Bytes& input, size_t block_bytes, int r) {
  return Bytes(input.begin() + r * block_bytes, input.begin() + (r + 1) * block_bytes);
}

TEST(ScatterEndToEnd, EachRankGetsItsBlockOfTheRootsInputThroughEveryPath) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  // 1 and 1,000 elements a block go below the shared-memory threshold (the arena, or
  // inline); 300,001 past it (a staging buffer, or a file).
  for (const testing::StagingPath& path : testing::StagingPaths()) {
    auto clients = ConnectAll(*cluster, -1, path.options);
    for (const DType dtype : {DType::kFloat32, DType::kInt8}) {
      for (const size_t block : {size_t{1}, size_t{1000}, size_t{300'001}}) {
        for (const int root : {0, 2}) {
          SCOPED_TRACE(absl::StrCat(path.name, ", ", DTypeName(dtype), ", block ", block,
                                    ", root ", root));
          const size_t esize = DTypeSize(dtype);
          const Bytes input = RootInput(dtype, block);
          std::vector<Bytes> outputs(kRanks, Bytes(block * esize, std::byte{0x5a}));
          ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
            // Only the root has an input; the others pass none, of the same size.
            return client.Scatter("shards", r == root ? input.data() : nullptr,
                                  block * kRanks, dtype, outputs[r].data(), block, root);
          }));
          for (int r = 0; r < kRanks; ++r) {
            EXPECT_TRUE(outputs[r] == BlockOf(input, block * esize, r)) << "rank " << r;
          }
        }
      }
    }
  }
}

// In a registered buffer the rank's own block of it as the output runs in place, on the
// root and on the others: nothing is staged, and each block is the root's.
TEST(ScatterEndToEnd, TheInPlaceFormInRegisteredBuffersRunsThere) {
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&] {
    return testing::WorkerMetric(*cluster, 0, "ringsync_registered_bytes").value_or(-1);
  };
  constexpr size_t kBlock = 400'000;
  constexpr int kRoot = 1;
  const Bytes input = RootInput(DType::kFloat32, kBlock);
  std::vector<RegisteredBuffer> buffers(kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    absl::StatusOr<RegisteredBuffer> buffer = client.Allocate<float>(kBlock * kRanks);
    if (!buffer.ok()) return buffer.status();
    buffers[r] = *std::move(buffer);
    if (r == kRoot) std::memcpy(buffers[r].data(), input.data(), input.size());
    return absl::OkStatus();
  }));
  const double before = registered_bytes();
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    auto* data = static_cast<std::byte*>(buffers[r].data());
    return client.Scatter("in place", data, kBlock * kRanks, DType::kFloat32,
                          data + r * kBlock * sizeof(float), kBlock, kRoot);
  }));
  EXPECT_EQ(registered_bytes(), before) << "nothing staged";
  const size_t block_bytes = kBlock * sizeof(float);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(buffers[r].data()) + r * block_bytes,
                          input.data() + r * block_bytes, block_bytes),
              0)
        << "rank " << r;
  }
}

TEST(ScatterEndToEnd, ARootWithoutInputOrRanksThatDisagreeFailEveryRankAndTheRingGoesOn) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int, Client& client) {
    std::vector<float> output(4, -1.0f);
    absl::Status s = client.Scatter("shards", nullptr, 4 * kRanks, DType::kFloat32,
                                    output.data(), 4, /*root=*/0);
    EXPECT_EQ(output, std::vector<float>(4, -1.0f)) << "the output is untouched";
    return s;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("this rank is the root, and its input is null"));
  EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("rank 0")) << "told who refused";

  statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<float> input(4 * kRanks, 1.0f), output(4);
    return client.Scatter<float>("shards", input, absl::MakeSpan(output), r == 2 ? 1 : 0);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("root")) << statuses[r];
  }

  std::vector<std::vector<int32_t>> outputs(kRanks, std::vector<int32_t>(2));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    const std::vector<int32_t> input = {10, 11, 20, 21, 30, 31};
    return client.Scatter<int32_t>("next", input, absl::MakeSpan(outputs[r]), /*root=*/2);
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(outputs[r], (std::vector<int32_t>{10 * (r + 1), 10 * (r + 1) + 1})) << r;
  }
}

}  // namespace
}  // namespace ringsync
