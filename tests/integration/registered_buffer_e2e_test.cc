// End to end: registered buffers (Client::Allocate), which the worker reduces in place.
// What a user may rely on: the same result as a plain span, bit for bit; bounds that say
// which flag to raise; and after a failure, a status that tells whether the buffer is
// untouched.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/testing/ring_test_data.h"
#include "gmock/gmock.h"
#include "ringsync/registered_buffer.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/http_get.h"
#include "tests/integration/worker_metric.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;
using testing::WorkerMetric;
using ::testing::HasSubstr;
using ::testing::Not;

// Non-exact float inputs: the rounding order must be the plain path's too.
Bytes RandomInput(DType dtype, size_t count, int rank) {
  std::mt19937 rng(1000 + rank);
  std::uniform_real_distribution<double> value(-100, 100);
  Bytes bytes = testing::MakeBuffer(dtype, count);
  for (size_t i = 0; i < count; ++i) testing::SetElement(dtype, bytes, i, value(rng));
  return bytes;
}

TEST(RegisteredBufferEndToEnd, AllReduceInPlaceEqualsThePlainSpanBitForBit) {
  constexpr int kRanks = 3;
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  // Inline-sized, past the shared-memory threshold, and a span at an offset inside a
  // larger buffer.
  struct Case {
    DType dtype;
    size_t count;
    size_t offset_elements;
  };
  for (const Case& c : {Case{DType::kFloat32, 1, 0}, Case{DType::kFloat32, 300'000, 0},
                        Case{DType::kFloat64, 70'001, 123}, Case{DType::kInt32, 5000, 7},
                        Case{DType::kBFloat16, 9999, 1}}) {
    SCOPED_TRACE(absl::StrCat(c.count, " x ", DTypeName(c.dtype), " at +", c.offset_elements));
    const size_t element = DTypeSize(c.dtype);
    std::vector<Bytes> plain(kRanks);
    std::vector<RegisteredBuffer> registered(kRanks);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      plain[r] = RandomInput(c.dtype, c.count, r);
      absl::StatusOr<RegisteredBuffer> buffer =
          client.AllocateBytes((c.count + c.offset_elements + 5) * element);
      if (!buffer.ok()) return buffer.status();
      registered[r] = *std::move(buffer);
      std::byte* in_place = static_cast<std::byte*>(registered[r].data()) + c.offset_elements * element;
      std::memcpy(in_place, plain[r].data(), plain[r].size());
      if (absl::Status s = client.AllReduce("plain", plain[r].data(), c.count, c.dtype, ReduceOp::kSum);
          !s.ok()) {
        return s;
      }
      return client.AllReduce("registered", in_place, c.count, c.dtype, ReduceOp::kSum);
    }));
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_NE(registered[r].data(), nullptr);
      const std::byte* in_place =
          static_cast<const std::byte*>(registered[r].data()) + c.offset_elements * element;
      EXPECT_EQ(std::memcmp(in_place, plain[r].data(), plain[r].size()), 0) << "rank " << r;
      EXPECT_EQ(std::memcmp(plain[r].data(), plain[0].data(), plain[r].size()), 0) << "rank " << r;
    }
  }
}

// A plain span past the shared-memory threshold is staged in registered memory by
// default; the result is the one a file-staged span gets, bit for bit, fused or not.
TEST(StagedSpanEndToEnd, EqualsAFileStagedSpanBitForBit) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 700'001;  // 2.8 MB of float32: past the 1 MiB threshold
  auto cluster = StartCluster(kRanks);
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<Bytes>> results;  // [staged, file][rank]: sum, then broadcast
  for (const bool staged : {true, false}) {
    ClientOptions options;
    options.stage_in_registered_memory = staged;
    auto clients = ConnectAll(*cluster, -1, options);
    std::vector<Bytes> out(2 * kRanks);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      out[r] = RandomInput(DType::kFloat32, kCount, r);
      if (absl::Status s = client.AllReduce("sum", out[r].data(), kCount, DType::kFloat32,
                                            ReduceOp::kSum);
          !s.ok()) {
        return s;
      }
      out[kRanks + r] = RandomInput(DType::kFloat32, kCount, r);
      return client.Broadcast("weights", out[kRanks + r].data(), kCount, DType::kFloat32,
                              /*root=*/2);
    }));
    results.push_back(std::move(out));
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_EQ(results[0][i], results[1][i]) << (i < kRanks ? "sum" : "broadcast") << ", rank "
                                            << i % kRanks;
    EXPECT_EQ(results[0][i], results[0][i < kRanks ? 0 : kRanks]) << "ranks differ";
  }
  EXPECT_EQ(results[0][kRanks], RandomInput(DType::kFloat32, kCount, 2)) << "the root's bytes";
}

// The SDK keeps the memory a plain span was staged in for the next collective of its
// size, and the arena small ones are staged in; after a one-off large collective the
// trainer hands both back, and the worker, which mapped them too, shows them gone.
TEST(StagedSpanEndToEnd, TheTrainerHandsItsIdleStagingMemoryBackAndTheWorkerLetsItGo) {
  constexpr size_t kCount = 700'001;  // 2.8 MB of float32: staged in a buffer of its own
  constexpr double kBytes = kCount * sizeof(float);
  auto cluster = StartCluster(1, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ASSERT_NE(clients[0], nullptr);
  Client& client = *clients[0];
  auto registered_bytes = [&] {
    return WorkerMetric(*cluster, 0, "ringsync_registered_bytes").value_or(-1);
  };
  const double before = registered_bytes();
  ASSERT_GE(before, 0) << "no ringsync_registered_bytes on the worker's /metrics";

  std::vector<float> weights(kCount, 1.5f);
  ASSERT_TRUE(client.AllReduce("weights", absl::MakeSpan(weights), ReduceOp::kSum).ok());
  EXPECT_GE(registered_bytes(), before + kBytes) << "the staging buffer is kept, registered";
  std::vector<float> bias(1000, 0.5f);  // small: staged in the arena, which is kept too
  ASSERT_TRUE(client.AllReduce("bias", absl::MakeSpan(bias), ReduceOp::kSum).ok());
  const double arena_bytes = static_cast<double>(ClientOptions{}.staging_arena_bytes);
  EXPECT_GE(registered_bytes(), before + kBytes + arena_bytes) << "the arena is registered";

  const size_t released = client.ReleaseIdleMemory();
  EXPECT_GE(static_cast<double>(released), kBytes + arena_bytes);
  EXPECT_EQ(registered_bytes(), before) << "the worker no longer maps it";
  EXPECT_EQ(client.ReleaseIdleMemory(), 0u) << "nothing left idle";

  std::vector<float> again(kCount, 2.5f);
  ASSERT_TRUE(client.AllReduce("again", absl::MakeSpan(again), ReduceOp::kSum).ok());
  EXPECT_EQ(again.front(), 2.5f);
  EXPECT_EQ(again.back(), 2.5f);
  ASSERT_TRUE(client.AllReduce("bias", absl::MakeSpan(bias), ReduceOp::kSum).ok());
  EXPECT_EQ(bias.front(), 0.5f) << "a new arena";
  EXPECT_GE(registered_bytes(), before + kBytes + arena_bytes) << "registered again";
}

// Below the shared-memory threshold a plain span is staged in the client's staging arena
// (ClientOptions::staging_arena_bytes), or inline when the arena is full or off; either
// way the result is the same, bit for bit. A small arena with many async calls in flight
// mixes the two paths in one batch.
TEST(StagedSpanEndToEnd, SmallSpansInTheStagingArenaEqualInlineOnesBitForBit) {
  constexpr int kRanks = 3;
  const std::vector<size_t> counts = {1, 17, 1000, 4096, 30'000, 3, 65'536, 250};
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  // How many collectives rank 0's worker took in registered memory (the arena) so far.
  const auto registered_so_far = [&] {
    const std::string page =
        testing::HttpGet(cluster->worker_http_address(0), "/metrics", cluster->http_token()).body;
    const std::string series = "ringsync_collective_data_total{path=\"registered\"} ";
    const size_t at = page.find(series);
    return at == std::string::npos ? 0 : std::stoi(page.substr(at + series.size()));
  };
  std::vector<int> registered;  // per run, on rank 0
  std::vector<std::vector<Bytes>> results;  // [arena size][rank x tensor], broadcast last
  for (const size_t arena_bytes : {size_t{16} << 20, size_t{64} << 10, size_t{0}}) {
    SCOPED_TRACE(absl::StrCat("staging_arena_bytes ", arena_bytes));
    ClientOptions options;
    options.staging_arena_bytes = arena_bytes;
    auto clients = ConnectAll(*cluster, -1, options);
    const size_t per_rank = counts.size() + 1;
    std::vector<Bytes> out(kRanks * per_rank);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      std::vector<CollectiveHandle> handles;
      for (size_t i = 0; i < counts.size(); ++i) {
        Bytes& tensor = out[r * per_rank + i];
        tensor = RandomInput(DType::kFloat32, counts[i], r * 100 + static_cast<int>(i));
        handles.push_back(client.AllReduceAsync(absl::StrCat("t", i), tensor.data(), counts[i],
                                                DType::kFloat32, ReduceOp::kSum));
      }
      Bytes& weights = out[r * per_rank + counts.size()];
      weights = RandomInput(DType::kFloat32, 5000, r);
      handles.push_back(client.BroadcastAsync("weights", weights.data(), 5000, DType::kFloat32,
                                              /*root=*/1));
      for (CollectiveHandle& handle : handles) {
        if (absl::Status s = handle.Wait(); !s.ok()) return s;
      }
      return absl::OkStatus();
    }));
    results.push_back(std::move(out));
    registered.push_back(registered_so_far() - std::accumulate(registered.begin(), registered.end(), 0));
  }
  EXPECT_EQ(registered[0], static_cast<int>(counts.size() + 1)) << "all of them in the arena";
  EXPECT_GT(registered[1], 0) << "some in the small arena";
  EXPECT_LT(registered[1], static_cast<int>(counts.size() + 1)) << "some inline";
  EXPECT_EQ(registered[2], 0) << "no arena: all inline";
  for (size_t i = 0; i < results[0].size(); ++i) {
    for (size_t run = 1; run < results.size(); ++run) {
      EXPECT_EQ(results[run][i], results[0][i]) << "run " << run << ", rank "
                                                << i / (counts.size() + 1) << ", tensor "
                                                << i % (counts.size() + 1);
    }
    EXPECT_EQ(results[0][i], results[0][i % (counts.size() + 1)]) << "ranks differ";
  }
  EXPECT_EQ(results[0][counts.size()], RandomInput(DType::kFloat32, 5000, 1)) << "the root's";
}

// An all-gather's plain spans are staged in registered memory too (the staging buffers
// past the shared-memory threshold, the arena below it): the worker gathers in place into
// the staged result, the SDK copies it out. The result is the one a file or an inline
// call gets, bit for bit; a failed all-gather leaves the caller's output untouched.
TEST(StagedSpanEndToEnd, AnAllGatherStagedInRegisteredMemoryEqualsAFileOrInlineOne) {
  constexpr int kRanks = 3;
  const std::vector<size_t> counts = {700'001, 1000};  // 2.8 MB of float32 per rank; 4 KB
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  const auto registered_so_far = [&] {
    return WorkerMetric(*cluster, 0, "ringsync_collective_data_total", "path=\"registered\"")
        .value_or(0);
  };
  std::vector<std::vector<Bytes>> results;  // [staged, not][rank x count]
  for (const bool staged : {true, false}) {
    SCOPED_TRACE(staged ? "staged in registered memory" : "a file, or inline");
    ClientOptions options;
    options.stage_in_registered_memory = staged;
    options.staging_arena_bytes = staged ? size_t{16} << 20 : 0;
    auto clients = ConnectAll(*cluster, -1, options);
    const double registered_before = registered_so_far();
    std::vector<Bytes> out(kRanks * counts.size());
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      for (size_t i = 0; i < counts.size(); ++i) {
        const Bytes input = RandomInput(DType::kFloat32, counts[i], r);
        Bytes& gathered = out[r * counts.size() + i];
        gathered = testing::MakeBuffer(DType::kFloat32, counts[i] * kRanks);
        if (absl::Status s = client.AllGather(absl::StrCat("g", i), input.data(), counts[i],
                                              DType::kFloat32, gathered.data(),
                                              counts[i] * kRanks);
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    }));
    EXPECT_EQ(registered_so_far() - registered_before, staged ? 2 : 0)
        << "all-gathers rank 0's worker ran in registered memory";
    results.push_back(std::move(out));
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    const size_t count = counts[i % counts.size()];
    EXPECT_EQ(results[0][i], results[1][i]) << "rank " << i / counts.size() << ", " << count;
    for (int slot = 0; slot < kRanks; ++slot) {
      const Bytes input = RandomInput(DType::kFloat32, count, slot);
      EXPECT_EQ(std::memcmp(results[0][i].data() + slot * input.size(), input.data(),
                            input.size()),
                0)
          << "slot " << slot << " holds rank " << slot << "'s input; " << count;
    }
  }

  // Rank 1 gathers another count: the ranks disagree, every rank fails, and no output
  // was written.
  auto clients = ConnectAll(*cluster);
  std::vector<Bytes> untouched(kRanks);
  const std::vector<absl::Status> failed =
      OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
        const size_t count = r == 1 ? counts[0] - 1 : counts[0];
        const Bytes input = RandomInput(DType::kFloat32, count, r);
        untouched[r] = Bytes(count * kRanks * sizeof(float), std::byte{0x5a});
        return client.AllGather("mismatched", input.data(), count, DType::kFloat32,
                                untouched[r].data(), count * kRanks);
      });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_FALSE(failed[r].ok()) << "rank " << r;
    EXPECT_EQ(untouched[r], Bytes(untouched[r].size(), std::byte{0x5a})) << "rank " << r;
  }
}

// A trainer in its own container lives in a pid namespace its worker cannot see into
// (deploy/docker-compose.yml runs them so): here worker 1 runs in a pid namespace of its
// own, where this test's process has no pid. Its buffers' descriptors go over the
// worker's descriptor socket, so its large tensors are staged in registered memory (and
// its calls take the call channel), not shared-memory files and RPCs.
TEST(RegisteredBufferEndToEnd, ATrainingProcessTheWorkerCannotSeeStagesInRegisteredMemory) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a pid namespace (unshare --pid) needs root";
  LocalClusterOptions options;
  options.world_size = 2;
  options.ringsyncd = RINGSYNCD_PATH;
  options.http = true;
  // With a /proc of its own, as a container has (LeakSanitizer lists the worker's threads
  // there; through the host's /proc it could not stop them and reported false leaks).
  options.worker_launcher_of[1] = {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc",
                                   "--kill-child=SIGTERM"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(**cluster);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    std::vector<float> tensor(1 << 20);
    for (int i = 0; i < 3; ++i) {
      std::fill(tensor.begin(), tensor.end(), static_cast<float>(r + i));
      if (absl::Status s = client.AllReduce("step", absl::MakeSpan(tensor), ReduceOp::kSum);
          !s.ok()) {
        return s;
      }
      if (tensor[12345] != static_cast<float>(1 + 2 * i)) return absl::InternalError("a wrong sum");
    }
    return absl::OkStatus();
  }));
  const std::string page =
      testing::HttpGet((*cluster)->worker_http_address(1), "/metrics", (*cluster)->http_token())
          .body;
  EXPECT_THAT(page, HasSubstr("ringsync_collective_data_total{path=\"registered\"} 3"))
      << "three 4 MiB tensors, staged in registered memory";
  EXPECT_THAT(page, Not(HasSubstr("ringsync_collective_data_total{path=\"file\"}")));
}

TEST(RegisteredBufferEndToEnd, BroadcastWritesTheRootsBytesIntoEveryRanksBuffer) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<RegisteredBuffer> buffers(2);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    absl::StatusOr<RegisteredBuffer> buffer = client.Allocate<int64_t>(200'000);
    if (!buffer.ok()) return buffer.status();
    buffers[r] = *std::move(buffer);
    absl::Span<int64_t> values = buffers[r].span<int64_t>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i) * (r + 1);
    return client.Broadcast("weights", values, /*root=*/1);
  }));
  for (int r = 0; r < 2; ++r) {
    absl::Span<int64_t> values = buffers[r].span<int64_t>();
    EXPECT_EQ(values[199'999], 2 * 199'999) << "rank " << r;
  }
}

// An AllGather whose output lies in a registered buffer gathers there in place: the SDK
// copies the input into the output's first slot (the worker moves it to the rank's) and
// stages nothing; the input may also be the rank's own slot of the output, as NCCL's
// in-place all-gather takes it. A failure after the SDK wrote the first slot does not
// call the buffer untouched.
TEST(RegisteredBufferEndToEnd, AnAllGatherIntoARegisteredOutputGathersInPlaceFromAnyInput) {
  constexpr int kRanks = 3;
  auto cluster = StartCluster(kRanks, {}, {}, /*http=*/true);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  const auto registered_bytes = [&] {
    return WorkerMetric(*cluster, 0, "ringsync_registered_bytes").value_or(-1);
  };
  for (const size_t count : {size_t{300'001}, size_t{1000}}) {  // 1.2 MB and 4 KB a rank
    for (const bool own_slot : {false, true}) {
      SCOPED_TRACE(absl::StrCat(count, own_slot ? ", input in its own slot" : ", apart"));
      std::vector<RegisteredBuffer> outputs(kRanks);
      ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
        absl::StatusOr<RegisteredBuffer> buffer = client.Allocate<float>(count * kRanks);
        if (!buffer.ok()) return buffer.status();
        outputs[r] = *std::move(buffer);
        return absl::OkStatus();
      }));
      const double registered_before = registered_bytes();
      ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
        const Bytes input = RandomInput(DType::kFloat32, count, r);
        auto* output = static_cast<std::byte*>(outputs[r].data());
        const std::byte* from = input.data();
        if (own_slot) {
          std::memcpy(output + r * input.size(), input.data(), input.size());
          from = output + r * input.size();
        }
        return client.AllGather("in place", from, count, DType::kFloat32, output, count * kRanks);
      }));
      EXPECT_EQ(registered_bytes(), registered_before) << "nothing staged: no buffer registered";
      for (int r = 0; r < kRanks; ++r) {
        for (int slot = 0; slot < kRanks; ++slot) {
          const Bytes input = RandomInput(DType::kFloat32, count, slot);
          EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(outputs[r].data()) +
                                    slot * input.size(),
                                input.data(), input.size()),
                    0)
              << "rank " << r << "'s slot " << slot;
        }
      }
    }
  }

  // The ranks disagree on the count: every rank fails in the agreement pass. Rank 0's
  // input lies in its first slot (nothing was written before the worker refused); the
  // others' were copied there.
  std::vector<absl::Status> failed(kRanks);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
    const size_t count = r == 1 ? 999 : 1000;
    absl::StatusOr<RegisteredBuffer> output = client.Allocate<float>(count * kRanks);
    if (!output.ok()) return output.status();
    const Bytes input = RandomInput(DType::kFloat32, count, r);
    auto* slots = static_cast<std::byte*>(output->data());
    if (r == 0) std::memcpy(slots, input.data(), input.size());
    failed[r] = client.AllGather("mismatched", r == 0 ? slots : input.data(), count,
                                 DType::kFloat32, slots, count * kRanks);
    return absl::OkStatus();
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_FALSE(failed[r].ok()) << "rank " << r;
    EXPECT_EQ(RegisteredBufferUntouched(failed[r]), r == 0) << "rank " << r << ": " << failed[r];
  }
}

TEST(RegisteredBufferEndToEnd, AFailureBeforeAnyByteMovedSaysTheBufferIsUntouched) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  std::vector<absl::Status> statuses = OnEveryRank(clients, [&](int r, Client& client) {
    absl::StatusOr<RegisteredBuffer> buffer = client.Allocate<float>(4096);
    if (!buffer.ok()) return buffer.status();
    absl::Span<float> values = buffer->span<float>();
    for (float& v : values) v = 1.5f;
    // The ranks disagree on the count: the agreement pass fails before data moves.
    const absl::Status s = client.AllReduce("mismatch", values.subspan(0, r == 0 ? 4096 : 1024),
                                            ReduceOp::kSum);
    EXPECT_FALSE(s.ok()) << "rank " << r;
    EXPECT_TRUE(RegisteredBufferUntouched(s)) << "rank " << r << ": " << s;
    for (float v : values) {
      if (v != 1.5f) return absl::InternalError(absl::StrCat("rank ", r, ": buffer was changed"));
    }
    return absl::OkStatus();
  });
  ExpectAllOk(statuses);
  EXPECT_FALSE(RegisteredBufferUntouched(absl::OkStatus()));
}

TEST(RegisteredBufferEndToEnd, TheWorkerBoundsHowManyBuffersAProcessRegisters) {
  auto cluster = StartCluster(1, {"--max_registered_buffers=2",
                                  "--max_registered_buffer_bytes=1048576"});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ASSERT_NE(clients[0], nullptr);
  Client& client = *clients[0];
  absl::StatusOr<RegisteredBuffer> too_big = client.AllocateBytes(2 << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status())) << too_big.status();
  EXPECT_THAT(too_big.status().message(), HasSubstr("--max_registered_buffer_bytes"));
  absl::StatusOr<RegisteredBuffer> first = client.Allocate<float>(1000);
  absl::StatusOr<RegisteredBuffer> second = client.Allocate<float>(1000);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  absl::StatusOr<RegisteredBuffer> third = client.Allocate<float>(1000);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("--max_registered_buffers"));
  *first = RegisteredBuffer();  // frees it, and its registration with the worker
  absl::StatusOr<RegisteredBuffer> again = client.Allocate<float>(1000);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::Span<float> values = again->span<float>();
  values[0] = 3;
  EXPECT_TRUE(client.AllReduce("one rank", values, ReduceOp::kSum).ok());
  EXPECT_EQ(values[0], 3);
}

TEST(RegisteredBufferEndToEnd, IdleStagingBuffersGiveWayToABufferTheTrainerAllocates) {
  // Room for the call channel's buffer and three more.
  auto cluster = StartCluster(1, {"--max_registered_buffers=4"});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ASSERT_NE(clients[0], nullptr);
  Client& client = *clients[0];
  // Plain spans of sizes no staging buffer of another can serve (each more than twice
  // the one before): the SDK stages each in a buffer of its own and keeps it idle after.
  std::vector<std::vector<float>> plain;
  for (size_t count : {size_t{300'000}, size_t{700'000}, size_t{1'500'000}}) {
    plain.emplace_back(count, 2.0f);
    ASSERT_TRUE(client.AllReduce("plain", absl::MakeSpan(plain.back()), ReduceOp::kSum).ok());
  }
  absl::StatusOr<RegisteredBuffer> mine = client.Allocate<float>(1000);
  ASSERT_TRUE(mine.ok()) << mine.status();
  mine->span<float>()[0] = 5;
  ASSERT_TRUE(client.AllReduce("mine", mine->span<float>(), ReduceOp::kSum).ok());
  EXPECT_EQ(mine->span<float>()[0], 5);
  // Plain spans still work beside it (staged anew, or in a file when no room is left).
  for (std::vector<float>& values : plain) {
    ASSERT_TRUE(client.AllReduce("plain again", absl::MakeSpan(values), ReduceOp::kSum).ok());
    EXPECT_EQ(values.back(), 2.0f);
  }
}

}  // namespace
}  // namespace ringsync
