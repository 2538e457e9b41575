// End to end: Client::AllToAll. Rank r's output holds, as its block q, rank q's block r,
// whichever way the tensors reach the workers, beside the input or in its place; a
// registered buffer runs in place; a count that is not one block per rank is refused by
// every rank, ranks that disagree fail every rank, and the ring serves the next call.
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

// What rank r receives: block r of every rank's input, in rank order.
Bytes Exchanged(const std::vector<Bytes>& inputs, int r) {
  const size_t block = inputs[0].size() / inputs.size();
  Bytes out;
  for (const Bytes& input : inputs) {
    out.insert(out.end(), input.begin() + static_cast<ptrdiff_t>(r * block),
               input.begin() + static_cast<ptrdiff_t>((r + 1) * block));
  }
  return out;
}

TEST(AllToAllEndToEnd, EachRankGetsItsBlockOfEveryRanksInputThroughEveryPath) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  // 1 and 1,000 elements a block go below the shared-memory threshold (the arena, or
  // inline) and over the stride links' gather pass; 300,001 past both (a staging buffer,
  // or a file; the direct transfer).
  for (const testing::StagingPath& path : testing::StagingPaths()) {
    auto clients = ConnectAll(*cluster, -1, path.options);
    for (const DType dtype : {DType::kFloat32, DType::kInt8}) {
      for (const size_t block : {size_t{1}, size_t{1000}, size_t{300'001}}) {
        for (const bool in_place : {false, true}) {
          SCOPED_TRACE(absl::StrCat(path.name, ", ", DTypeName(dtype), ", block ", block,
                                    in_place ? ", in place" : ""));
          const size_t count = block * kRanks;
          std::vector<Bytes> inputs;
          for (int r = 0; r < kRanks; ++r) {
            inputs.push_back(testing::RandomInput(dtype, count, r, 29));
          }
          std::vector<Bytes> outputs =
              in_place ? inputs : std::vector<Bytes>(kRanks, Bytes(count * DTypeSize(dtype)));
          ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
            const void* input = in_place ? outputs[r].data() : inputs[r].data();
            return client.AllToAll("tokens", input, count, dtype, outputs[r].data(), count);
          }));
          for (int r = 0; r < kRanks; ++r) {
            EXPECT_TRUE(outputs[r] == Exchanged(inputs, r)) << "rank " << r;
          }
        }
      }
    }
  }
}

TEST(AllToAllEndToEnd, ARegisteredBufferRunsInPlace) {
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&](int r) {
    return testing::WorkerMetric(*cluster, r, "ringsync_registered_bytes").value_or(-1);
  };
  constexpr size_t kCount = 3 * 200'000;
  std::vector<Bytes> inputs;
  std::vector<RegisteredBuffer> buffers;
  for (int r = 0; r < kRanks; ++r) {
    inputs.push_back(testing::RandomInput(DType::kFloat32, kCount, r, 31));
    absl::StatusOr<RegisteredBuffer> buffer = clients[r]->Allocate<float>(kCount);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::memcpy(buffer->data(), inputs[r].data(), inputs[r].size());
    buffers.push_back(*std::move(buffer));
  }
  std::vector<double> before;
  for (int r = 0; r < kRanks; ++r) before.push_back(registered_bytes(r));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    float* data = static_cast<float*>(buffers[r].data());
    return client.AllToAll("experts", data, kCount, DType::kFloat32, data, kCount);
  }));
  for (int r = 0; r < kRanks; ++r) {
    const Bytes want = Exchanged(inputs, r);
    EXPECT_EQ(std::memcmp(buffers[r].data(), want.data(), want.size()), 0) << "rank " << r;
    EXPECT_EQ(registered_bytes(r), before[r]) << "rank " << r << ": nothing staged";
  }
}

TEST(AllToAllEndToEnd, UnevenBlocksOrRanksThatDisagreeFailEveryRankAndTheRingGoesOn) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int, Client& client) {
    std::vector<float> data(4, 1.0f);  // 4 elements: not one block for each of 3 ranks
    return client.AllToAll<float>("tokens", data, absl::MakeSpan(data));
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                HasSubstr("not one block for each of this ring's 3 ranks"));
  }

  statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<float> input(r == 2 ? 6 : 3, 1.0f), output(input.size(), -1.0f);
    absl::Status s = client.AllToAll<float>("tokens", input, absl::MakeSpan(output));
    EXPECT_EQ(output, std::vector<float>(input.size(), -1.0f)) << "the output is untouched";
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("alltoall")) << statuses[r];
  }

  std::vector<std::vector<int32_t>> outputs(kRanks, std::vector<int32_t>(kRanks));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    const std::vector<int32_t> input = {10 * r, 10 * r + 1, 10 * r + 2};
    return client.AllToAll<int32_t>("next", input, absl::MakeSpan(outputs[r]));
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(outputs[r], (std::vector<int32_t>{r, 10 + r, 20 + r})) << "rank " << r;
  }
}

}  // namespace
}  // namespace ringsync
