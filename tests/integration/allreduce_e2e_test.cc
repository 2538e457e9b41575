// End to end: real coordinator and worker processes on loopback, SDK clients as the
// training processes. What a user of `ringsyncd` + the SDK can rely on.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"

#include "core/testing/ring_test_data.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

using testing::Bytes;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;

TEST(EndToEnd, SeedCaseThroughTheSdk) {
  auto cluster = StartCluster(4);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const std::vector<std::vector<float>> inputs = {{1, 2, 3, 4}, {2, 2, 2, 2}, {0, 1, 0, 1}, {1, 1, 1, 1}};
  std::vector<std::vector<float>> results = inputs;
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), 4);
    return c.AllReduce("seed", absl::MakeSpan(results[r]), ReduceOp::kSum);
  }));
  for (const auto& result : results) EXPECT_EQ(result, (std::vector<float>{4, 6, 6, 8}));
}

// Random counts, dtypes and ops; inputs whose combination is exact, so the reference
// needs no model of rounding order.
void RandomCollectivesMatchTheReference(int world_size, int rounds) {
  auto cluster = StartCluster(world_size);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::mt19937 rng(world_size);
  for (int round = 0; round < rounds; ++round) {
    const DType dtype = kAllDTypes[rng() % std::size(kAllDTypes)];
    const ReduceOp op = kAllReduceOps[rng() % std::size(kAllReduceOps)];
    // Mostly small, sometimes past the SDK's shared-memory threshold (1 MiB).
    const size_t count = rng() % 4 == 0 ? (1 << 20) / DTypeSize(dtype) + rng() % 1000 : rng() % 5000;
    SCOPED_TRACE(absl::StrCat("round ", round, ": ", count, " x ", DTypeName(dtype), " ",
                              ReduceOpName(op)));
    std::vector<Bytes> inputs, buffers;
    for (int r = 0; r < world_size; ++r) inputs.push_back(testing::ExactInput(dtype, op, count, r, round));
    buffers = inputs;
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) {
      return c.AllReduce(absl::StrCat("round", round), buffers[r].data(), count, dtype, op);
    }));
    Bytes expected = testing::MakeBuffer(dtype, count);
    for (size_t i = 0; i < count; ++i) {
      std::vector<double> column;
      for (int r = 0; r < world_size; ++r) column.push_back(testing::GetElement(dtype, inputs[r], i));
      testing::SetElement(dtype, expected, i, testing::NaiveReduce(dtype, op, column));
    }
    for (int r = 0; r < world_size; ++r) EXPECT_TRUE(buffers[r] == expected) << "rank " << r;
  }
}

TEST(EndToEnd, OneRank) { RandomCollectivesMatchTheReference(1, 6); }
TEST(EndToEnd, TwoRanks) { RandomCollectivesMatchTheReference(2, 10); }
TEST(EndToEnd, ThreeRanks) { RandomCollectivesMatchTheReference(3, 10); }
TEST(EndToEnd, FourRanks) { RandomCollectivesMatchTheReference(4, 12); }
TEST(EndToEnd, EightRanks) { RandomCollectivesMatchTheReference(8, 6); }

TEST(EndToEnd, AThousandBackToBackSmallAllReduces) {
  auto cluster = StartCluster(4);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    std::vector<int64_t> value(3);
    for (int i = 0; i < 1000; ++i) {
      std::fill(value.begin(), value.end(), r + i);
      if (absl::Status s = c.AllReduce("small", absl::MakeSpan(value), ReduceOp::kSum); !s.ok()) {
        return s;
      }
      const int64_t expected = 4 * i + 6;
      if (value[0] != expected || value[2] != expected) {
        return absl::InternalError(absl::StrCat("iteration ", i, ": ", value[0], " != ", expected));
      }
    }
    return absl::OkStatus();
  }));
}

TEST(EndToEnd, SeveralConcurrentAsyncCollectives) {
  auto cluster = StartCluster(3);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  constexpr int kInFlight = 8;
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    std::vector<std::vector<float>> tensors(kInFlight);
    std::vector<CollectiveHandle> handles;
    for (int k = 0; k < kInFlight; ++k) {
      tensors[k].assign(1000 + k * 50000, static_cast<float>(r + k));  // some inline, some shm
      handles.push_back(c.AllReduceAsync(absl::StrCat("async", k), absl::MakeSpan(tensors[k]),
                                         ReduceOp::kSum));
    }
    for (int k = 0; k < kInFlight; ++k) {
      if (absl::Status s = handles[k].Wait(); !s.ok()) return s;
      const float expected = static_cast<float>(3 * k + 3);
      for (float v : tensors[k]) {
        if (v != expected) return absl::InternalError(absl::StrCat("tensor ", k, ": ", v));
      }
    }
    return absl::OkStatus();
  }));
}

TEST(EndToEnd, BroadcastAllGatherAndBarrier) {
  auto cluster = StartCluster(4);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    std::vector<int32_t> data(500, r == 2 ? 42 : -1);
    if (absl::Status s = c.Broadcast("bcast", absl::MakeSpan(data), /*root=*/2); !s.ok()) return s;
    for (int32_t v : data) {
      if (v != 42) return absl::InternalError("broadcast result");
    }
    std::vector<double> mine(7, r * 1.5), all(4 * 7);
    if (absl::Status s = c.AllGather<double>("gather", mine, absl::MakeSpan(all)); !s.ok()) return s;
    for (int q = 0; q < 4; ++q) {
      if (all[q * 7] != q * 1.5 || all[q * 7 + 6] != q * 1.5) return absl::InternalError("gather");
    }
    return c.Barrier("barrier");
  }));
}

// A figure of a worker's /proc/<pid>/status in bytes, e.g. "VmHWM" (its peak resident
// set) or "RssAnon" (its own resident memory now, not what it maps of a client's); 0 if it
// cannot be read.
uint64_t StatusBytes(pid_t pid, absl::string_view field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  const std::string prefix = absl::StrCat(field, ":");
  std::string line;
  while (std::getline(status, line)) {
    uint64_t kib = 0;
    if (absl::StartsWith(line, prefix) &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(prefix.size())), " kB"),
                         &kib)) {
      return kib << 10;
    }
  }
  return 0;
}

// A 128 MiB then a 256 MiB all-reduce, staged the SDK's default way (in registered memory
// the worker reduces in place) or in a shared-memory file (the worker copies it in and
// out). Also what it costs: each rank puts exactly 2(N-1)/N x S bytes on the ring (and
// takes as many), and a worker's own memory never exceeds S + 64 MiB — also after a smaller
// tensor ran first (the memory a worker keeps for shared tensors then has to grow).
void AllReduce256MiB(bool staged_in_registered_memory) {
  auto cluster = StartCluster(4, {"--log_level=debug"});
  ASSERT_NE(cluster, nullptr);
  ClientOptions options;
  options.stage_in_registered_memory = staged_in_registered_memory;
  auto clients = ConnectAll(*cluster, -1, options);
  constexpr uint64_t kBytes = uint64_t{256} << 20;
  const size_t count = kBytes / sizeof(float);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& c) -> absl::Status {
    std::vector<float> tensor(count);
    for (size_t i = 0; i < count; ++i) tensor[i] = static_cast<float>((i + r) % 1024);
    AllReduceOptions options;
    options.timeout = absl::Minutes(5);
    std::vector<float> smaller(count / 2, 1.0f);
    if (absl::Status s = c.AllReduce("smaller", absl::MakeSpan(smaller), ReduceOp::kSum, options);
        !s.ok()) {
      return s;
    }
    if (smaller.front() != 4.0f || smaller.back() != 4.0f) return absl::InternalError("smaller");
    if (absl::Status s = c.AllReduce("big", absl::MakeSpan(tensor), ReduceOp::kSum, options); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < count; i += 4099) {
      float expected = 0;
      for (int q = 0; q < 4; ++q) expected += static_cast<float>((i + q) % 1024);
      if (tensor[i] != expected) return absl::InternalError(absl::StrCat("element ", i));
    }
    return absl::OkStatus();
  });
  ExpectAllOk(statuses);
  const uint64_t ring_bytes = kBytes / 4 * 2 * 3;
  for (int i = 0; i < 4; ++i) {
    const uint64_t peak = StatusBytes(cluster->worker(i).pid(), "VmHWM");
    EXPECT_GT(peak, 0u) << "worker " << i;
    // The bound is the release build's: AddressSanitizer's shadow memory and quarantine
    // more than double a worker's resident memory.
    if (!kAddressSanitizer && staged_in_registered_memory) {
      // Its resident set counts the client's staging memory it maps (the 128 and the
      // 256 MiB buffer, both kept for reuse), but it holds no copy of its own.
      EXPECT_LE(peak, kBytes + kBytes / 2 + (uint64_t{64} << 20))
          << "worker " << i << " peak RSS " << (peak >> 20) << " MiB for a 256 MiB all-reduce";
      const uint64_t own = StatusBytes(cluster->worker(i).pid(), "RssAnon");
      EXPECT_GT(own, 0u) << "worker " << i;
      EXPECT_LE(own, uint64_t{64} << 20)
          << "worker " << i << " keeps " << (own >> 20) << " MiB of its own after the all-reduces";
    } else if (!kAddressSanitizer) {
      EXPECT_LE(peak, kBytes + (uint64_t{64} << 20))
          << "worker " << i << " peak RSS " << (peak >> 20) << " MiB for a 256 MiB all-reduce";
    }
    // The worker's debug line for the collective: "... done in ...: sent B, received B".
    EXPECT_THAT(cluster->Log(cluster->worker_id(i)),
                ::testing::HasSubstr(absl::StrCat("sent ", ring_bytes, " B, received ", ring_bytes,
                                                  " B on the ring")))
        << "worker " << i;
  }
}

TEST(EndToEnd, A256MiBTensor) { AllReduce256MiB(/*staged_in_registered_memory=*/true); }

TEST(EndToEnd, A256MiBTensorStagedInAFile) {
  AllReduce256MiB(/*staged_in_registered_memory=*/false);
}

}  // namespace
}  // namespace ringsync
