// End to end: Client::Gather. The root gets every rank's input in rank order, whichever
// way the tensors reach the workers, the other ranks passing no output at all (or one
// that stays untouched); in a registered buffer the root's output runs in place; a root
// without an output, or ranks that disagree, fail every rank, and the ring serves the
// next call.
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

Bytes Concatenated(const std::vector<Bytes>& inputs) {
  Bytes all;
  for (const Bytes& input : inputs) all.insert(all.end(), input.begin(), input.end());
  return all;
}

TEST(GatherEndToEnd, TheRootGetsEveryRanksInputInRankOrderThroughEveryPath) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  // 1 and 1,000 elements a rank go below the shared-memory threshold (the arena, or
  // inline); 300,001 past it (a staging buffer, or a file).
  for (const testing::StagingPath& path : testing::StagingPaths()) {
    auto clients = ConnectAll(*cluster, -1, path.options);
    for (const DType dtype : {DType::kFloat32, DType::kInt8}) {
      for (const size_t count : {size_t{1}, size_t{1000}, size_t{300'001}}) {
        for (const int root : {0, 2}) {
          SCOPED_TRACE(absl::StrCat(path.name, ", ", DTypeName(dtype), ", count ", count,
                                    ", root ", root));
          const size_t esize = DTypeSize(dtype);
          std::vector<Bytes> inputs;
          for (int r = 0; r < kRanks; ++r) {
            inputs.push_back(testing::RandomInput(dtype, count, r, 23));
          }
          // Rank 1 passes an output too, which is not the root's and so stays untouched.
          std::vector<Bytes> outputs(kRanks, Bytes(kRanks * count * esize, std::byte{0x5a}));
          ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
            void* output = r == root || r == 1 ? outputs[r].data() : nullptr;
            return client.Gather("ids", inputs[r].data(), count, dtype, output, kRanks * count,
                                 root);
          }));
          EXPECT_TRUE(outputs[root] == Concatenated(inputs)) << "the root's output";
          if (root != 1) {
            EXPECT_TRUE(outputs[1] == Bytes(kRanks * count * esize, std::byte{0x5a}))
                << "another rank's output is untouched";
          }
        }
      }
    }
  }
}

// In a registered buffer the root's output runs in place, its input its own slot (NCCL's
// in-place form): nothing is staged there.
TEST(GatherEndToEnd, TheRootsRegisteredOutputRunsInPlace) {
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&] {
    return testing::WorkerMetric(*cluster, 1, "ringsync_registered_bytes").value_or(-1);
  };
  constexpr size_t kCount = 400'000;
  constexpr int kRoot = 1;
  std::vector<Bytes> inputs;
  for (int r = 0; r < kRanks; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, kCount, r, 9));
  }
  absl::StatusOr<RegisteredBuffer> output = clients[kRoot]->Allocate<float>(kCount * kRanks);
  ASSERT_TRUE(output.ok()) << output.status();
  auto* out = static_cast<std::byte*>(output->data());
  const size_t slot_bytes = kCount * sizeof(float);
  std::memcpy(out + kRoot * slot_bytes, inputs[kRoot].data(), slot_bytes);
  const double before = registered_bytes();
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    if (r == kRoot) {
      return client.Gather("in place", out + kRoot * slot_bytes, kCount, DType::kFloat32, out,
                           kCount * kRanks, kRoot);
    }
    return client.Gather("in place", inputs[r].data(), kCount, DType::kFloat32, nullptr,
                         kCount * kRanks, kRoot);
  }));
  EXPECT_EQ(registered_bytes(), before) << "nothing staged at the root";
  const Bytes all = Concatenated(inputs);
  EXPECT_EQ(std::memcmp(out, all.data(), all.size()), 0);
}

TEST(GatherEndToEnd, ARootWithoutOutputOrRanksThatDisagreeFailEveryRankAndTheRingGoesOn) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int, Client& client) {
    const std::vector<float> input(4, 1.0f);
    return client.Gather("ids", input.data(), 4, DType::kFloat32, nullptr, 4 * kRanks,
                         /*root=*/0);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("this rank is the root, and its output is null"));
  EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("rank 0")) << "told who refused";

  statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<float> input(4, 1.0f), output(4 * kRanks, -1.0f);
    absl::Status s =
        client.Gather<float>("ids", input, absl::MakeSpan(output), r == 2 ? 1 : 0);
    EXPECT_EQ(output, std::vector<float>(4 * kRanks, -1.0f)) << "the output is untouched";
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("root")) << statuses[r];
  }

  std::vector<int32_t> gathered(2 * kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    const std::vector<int32_t> input = {10 * (r + 1), 10 * (r + 1) + 1};
    return client.Gather<int32_t>("next", input,
                                  r == 2 ? absl::MakeSpan(gathered)
                                         : absl::Span<int32_t>(nullptr, gathered.size()),
                                  /*root=*/2);
  }));
  EXPECT_EQ(gathered, (std::vector<int32_t>{10, 11, 20, 21, 30, 31}));
}

}  // namespace
}  // namespace ringsync
