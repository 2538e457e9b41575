// End to end: Client::AllToAll and AllToAllV. Rank r's output holds, as its block q, rank
// q's block r, whichever way the tensors reach the workers, beside the input or in its
// place (even blocks), or of the sizes the ranks' splits give; a registered buffer runs in
// place; a count that is not one block per rank, or splits that do not match or add up,
// are refused by every rank, ranks that disagree fail every rank, and the ring serves the
// next call. Beyond sixteen ranks the blocks hop the doubling's links, with the same result.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/allreduce_algorithm.h"
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

// A worker of a ring beyond kDirectRanksLimit links only to the ranks 1, 2, 4, ... away:
// an all-to-all's blocks hop those links (core/ring/doubling_exchange.h), even in place and
// uneven from an input into an output.
TEST(AllToAllEndToEnd, SeventeenRanksExchangeOverTheDoublingsLinks) {
  constexpr int kMany = kDirectRanksLimit + 1;
  auto cluster = StartCluster(kMany);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const size_t count = 20'000 * kMany;  // past the stride links' gather pass
  std::vector<Bytes> inputs;
  for (int r = 0; r < kMany; ++r) inputs.push_back(testing::RandomInput(DType::kFloat32, count, r, 37));
  std::vector<Bytes> outputs = inputs;
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    return client.AllToAll("tokens", outputs[r].data(), count, DType::kFloat32, outputs[r].data(),
                           count);
  }));
  for (int r = 0; r < kMany; ++r) EXPECT_TRUE(outputs[r] == Exchanged(inputs, r)) << "rank " << r;

  // Uneven: rank q sends rank r (1 + (q + 2r) mod 5) x 700 elements.
  const auto elements = [](int q, int r) { return uint64_t{700} * (1 + (q + 2 * r) % 5); };
  std::vector<std::vector<float>> sent(kMany), got(kMany);
  std::vector<std::vector<uint64_t>> sends(kMany), receives(kMany);
  for (int r = 0; r < kMany; ++r) {
    for (int q = 0; q < kMany; ++q) {
      sends[r].push_back(elements(r, q));
      receives[r].push_back(elements(q, r));
      for (uint64_t i = 0; i < elements(r, q); ++i) sent[r].push_back(static_cast<float>(r * 100 + q));
    }
    uint64_t total = 0;
    for (uint64_t n : receives[r]) total += n;
    got[r].assign(total, -1.0f);
  }
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    return client.AllToAllV<float>("experts", sent[r], sends[r], absl::MakeSpan(got[r]),
                                   receives[r]);
  }));
  for (int r = 0; r < kMany; ++r) {
    size_t at = 0;
    for (int q = 0; q < kMany; ++q) {
      for (uint64_t i = 0; i < elements(q, r); ++i, ++at) {
        ASSERT_EQ(got[r][at], static_cast<float>(q * 100 + r)) << "rank " << r << " from " << q;
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

// Rank q sends Split(scale, q, r) elements to rank r: some blocks empty, the others of
// different sizes.
uint64_t Split(size_t scale, int q, int r) { return ((q * 5 + r * 3) % 4) * scale; }

std::vector<uint64_t> SendCounts(size_t scale, int q) {
  std::vector<uint64_t> counts;
  for (int r = 0; r < kRanks; ++r) counts.push_back(Split(scale, q, r));
  return counts;
}

std::vector<uint64_t> ReceiveCounts(size_t scale, int r) {
  std::vector<uint64_t> counts;
  for (int q = 0; q < kRanks; ++q) counts.push_back(Split(scale, q, r));
  return counts;
}

// What rank r receives in an uneven all-to-all: rank q's block r, in rank order.
Bytes UnevenExchanged(const std::vector<Bytes>& inputs, size_t scale, size_t esize, int r) {
  Bytes out;
  for (int q = 0; q < kRanks; ++q) {
    size_t at = 0;
    for (int i = 0; i < r; ++i) at += Split(scale, q, i) * esize;
    const size_t bytes = Split(scale, q, r) * esize;
    out.insert(out.end(), inputs[q].begin() + static_cast<ptrdiff_t>(at),
               inputs[q].begin() + static_cast<ptrdiff_t>(at + bytes));
  }
  return out;
}

uint64_t Sum(const std::vector<uint64_t>& counts) {
  uint64_t sum = 0;
  for (uint64_t count : counts) sum += count;
  return sum;
}

TEST(AllToAllVEndToEnd, EachRankGetsItsUnevenBlockOfEveryRanksInputThroughEveryPath) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  for (const testing::StagingPath& path : testing::StagingPaths()) {
    auto clients = ConnectAll(*cluster, -1, path.options);
    for (const DType dtype : {DType::kFloat32, DType::kInt8}) {
      // Blocks of 0 to 3 elements, and of up to 900,003 (past the shared-memory threshold).
      for (const size_t scale : {size_t{1}, size_t{300'001}}) {
        SCOPED_TRACE(absl::StrCat(path.name, ", ", DTypeName(dtype), ", scale ", scale));
        std::vector<Bytes> inputs;
        std::vector<Bytes> outputs;
        for (int r = 0; r < kRanks; ++r) {
          inputs.push_back(testing::RandomInput(dtype, Sum(SendCounts(scale, r)), r, 37));
          outputs.emplace_back(Sum(ReceiveCounts(scale, r)) * DTypeSize(dtype), std::byte{0xEE});
        }
        const std::vector<Bytes> given = inputs;
        ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
          const std::vector<uint64_t> sends = SendCounts(scale, r);
          const std::vector<uint64_t> receives = ReceiveCounts(scale, r);
          return client.AllToAllV("tokens", inputs[r].data(), Sum(sends), sends, dtype,
                                  outputs[r].data(), Sum(receives), receives);
        }));
        for (int r = 0; r < kRanks; ++r) {
          EXPECT_TRUE(outputs[r] == UnevenExchanged(inputs, scale, DTypeSize(dtype), r))
              << "rank " << r;
          EXPECT_TRUE(inputs[r] == given[r]) << "rank " << r << "'s input is kept";
        }
      }
    }
  }
}

TEST(AllToAllVEndToEnd, AnInputAndOutputSideBySideInARegisteredBufferRunInPlace) {
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&](int r) {
    return testing::WorkerMetric(*cluster, r, "ringsync_registered_bytes").value_or(-1);
  };
  constexpr size_t kScale = 100'000;
  std::vector<Bytes> inputs;
  std::vector<RegisteredBuffer> buffers;
  for (int r = 0; r < kRanks; ++r) {
    const size_t in = Sum(SendCounts(kScale, r));
    inputs.push_back(testing::RandomInput(DType::kFloat32, in, r, 41));
    absl::StatusOr<RegisteredBuffer> buffer =
        clients[r]->Allocate<float>(in + Sum(ReceiveCounts(kScale, r)));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::memcpy(buffer->data(), inputs[r].data(), inputs[r].size());
    buffers.push_back(*std::move(buffer));
  }
  std::vector<double> before;
  for (int r = 0; r < kRanks; ++r) before.push_back(registered_bytes(r));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    float* input = static_cast<float*>(buffers[r].data());
    const std::vector<uint64_t> sends = SendCounts(kScale, r);
    const std::vector<uint64_t> receives = ReceiveCounts(kScale, r);
    return client.AllToAllV("experts", input, Sum(sends), sends, DType::kFloat32,
                            input + Sum(sends), Sum(receives), receives);
  }));
  for (int r = 0; r < kRanks; ++r) {
    const Bytes want = UnevenExchanged(inputs, kScale, sizeof(float), r);
    EXPECT_EQ(std::memcmp(static_cast<char*>(buffers[r].data()) + inputs[r].size(), want.data(),
                          want.size()),
              0)
        << "rank " << r;
    EXPECT_EQ(registered_bytes(r), before[r]) << "rank " << r << ": nothing staged";
  }
}

TEST(AllToAllVEndToEnd, SplitsThatDoNotMatchOrAddUpFailEveryRankAndTheRingGoesOn) {
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  // Rank 2 expects 2 elements from rank 1, which sends it 1.
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<uint64_t> sends = {1, 1, 1};
    std::vector<uint64_t> receives = {1, r == 2 ? uint64_t{2} : uint64_t{1}, 1};
    std::vector<float> input(3, 1.0f), output(Sum(receives), -1.0f);
    absl::Status s = client.AllToAllV<float>("tokens", input, sends, absl::MakeSpan(output),
                                             receives);
    EXPECT_EQ(output, std::vector<float>(output.size(), -1.0f)) << "the output is untouched";
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                HasSubstr("rank 1 sends 1 elements to rank 2, which expects 2 from it"));
  }
  // Splits that are not one per rank, or that do not add up to the buffers: refused.
  statuses = OnEveryRank(clients, [&](int r, Client& client) {
    std::vector<uint64_t> sends = r == 0 ? std::vector<uint64_t>{1, 1} : std::vector<uint64_t>{1, 1, 1};
    std::vector<float> input(Sum(sends), 1.0f), output(3, -1.0f);
    return client.AllToAllV<float>("short", input, sends, absl::MakeSpan(output), {1, 1, 1});
  });
  EXPECT_TRUE(absl::IsInvalidArgument(statuses[0])) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("send_counts lists 2 ranks"));
  for (int r = 1; r < kRanks; ++r) EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
  statuses = OnEveryRank(clients, [&](int, Client& client) {
    std::vector<float> input(4, 1.0f), output(3, -1.0f);
    return client.AllToAllV<float>("sums", input, {1, 1, 1}, absl::MakeSpan(output), {1, 1, 1});
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("send_counts add up to 3, not to count 4"));
  }

  std::vector<std::vector<int32_t>> outputs(kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    const std::vector<int32_t> input = {10 * r, 10 * r + 1, 10 * r + 2};
    outputs[r].assign(3, 0);
    return client.AllToAllV<int32_t>("next", input, {1, 1, 1}, absl::MakeSpan(outputs[r]),
                                     {1, 1, 1});
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(outputs[r], (std::vector<int32_t>{r, 10 + r, 20 + r})) << "rank " << r;
  }
}

}  // namespace
}  // namespace ringsync
