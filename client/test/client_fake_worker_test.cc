// The SDK against FakeWorker: connection, request encoding, transport choice, result
// copy-back and error paths. The real worker is exercised by the end-to-end tests.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/test/fake_worker.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringsync/client.h"
#include "ringsync/outcome.h"

namespace ringsync {
namespace {

using ::ringsync::testing::FakeWorker;
using ::ringsync::testing::SeenRequest;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Polls `condition` for up to 5 s.
template <typename F>
bool Eventually(F condition) {
  for (const SteadyDeadline until(absl::Seconds(5)); !until.Passed();) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return condition();
}

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

std::vector<float> Doubled(std::vector<float> v) {
  for (float& x : v) x *= 2;
  return v;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { worker_.Start(); }

  std::unique_ptr<Client> Connect(const std::string& target = "", ClientOptions options = {}) {
    options.connect_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(target.empty() ? worker_.unix_target() : target, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The fake worker reports this place in a formed ring.
  void PlaceWorkerAt(int rank, int world_size) {
    v1::WorkerInfo info = worker_.info();
    info.set_rank(rank);
    info.set_world_size(world_size);
    worker_.SetInfo(info);
  }

  FakeWorker worker_;
};

ClientOptions WithConnectTimeout(absl::Duration timeout) {
  ClientOptions options;
  options.connect_timeout = timeout;
  return options;
}

ClientOptions WithThreshold(size_t bytes) {
  ClientOptions options;
  options.shared_memory_threshold_bytes = bytes;
  return options;
}

constexpr size_t kOneMiBOfFloats = (size_t{1} << 20) / sizeof(float);

TEST_F(ClientTest, ConnectReportsTheRingAndAttaches) {
  v1::WorkerInfo info = worker_.info();
  info.set_rank(1);
  info.set_world_size(3);
  info.set_generation(7);
  worker_.SetInfo(info);
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->rank(), 1);
  EXPECT_EQ(client->world_size(), 3);
  EXPECT_EQ(client->generation(), 7u);
  EXPECT_TRUE(client->ready());
  EXPECT_TRUE(worker_.attached());
  EXPECT_EQ(worker_.attached_client_name(), absl::StrCat("pid ", getpid()));
  client.reset();
  EXPECT_TRUE(Eventually([&] { return !worker_.attached(); })) << "destruction detaches";
}

TEST_F(ClientTest, ConnectAcceptsEveryTargetForm) {
  EXPECT_NE(Connect(worker_.socket_path()), nullptr);
  ASSERT_TRUE(Eventually([&] { return !worker_.attached(); }));
  EXPECT_NE(Connect(worker_.tcp_target()), nullptr);
}

TEST_F(ClientTest, ConnectWaitsForAFormedRing) {
  v1::WorkerInfo info = worker_.info();
  info.set_ready(false);
  info.set_rank(-1);
  worker_.SetInfo(info);
  std::thread former([&] {
    absl::SleepFor(absl::Milliseconds(300));
    v1::WorkerInfo formed = info;
    formed.set_ready(true);
    formed.set_rank(1);
    formed.set_generation(2);
    worker_.SetInfo(formed);
  });
  const SteadyStopwatch start;
  std::unique_ptr<Client> client = Connect();
  former.join();
  ASSERT_NE(client, nullptr);
  EXPECT_GE(start.Elapsed(), absl::Milliseconds(250));
  EXPECT_EQ(client->rank(), 1);
  EXPECT_EQ(client->generation(), 2u);
}

TEST_F(ClientTest, ConnectTimesOutNamingWhatItWaitedFor) {
  v1::WorkerInfo info = worker_.info();
  info.set_ready(false);
  info.set_rank(-1);
  worker_.SetInfo(info);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(worker_.unix_target(), WithConnectTimeout(absl::Milliseconds(300)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("no formed ring within 300ms"));
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("worker 'fake-w0', rank -1"));
  EXPECT_TRUE(Eventually([&] { return !worker_.attached(); })) << "a failed Connect detaches";
}

TEST_F(ClientTest, ConnectToNoWorkerSaysHowToStartOne) {
  const std::string missing = "/tmp/ringsync-client-test-no-such-dir/worker.sock";
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect("unix:" + missing, WithConnectTimeout(absl::Milliseconds(200)));
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr("is `ringsyncd worker` running with --socket=" + missing + "?"));

  client = Client::Connect("no-port", {});
  EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
}

// The worker logs the client's name and quotes it to the other ranks: Connect refuses one
// that is long or not UTF-8 text before it reaches the worker.
TEST_F(ClientTest, ConnectRefusesAClientNameThatIsLongOrNotText) {
  for (const std::string& name : {std::string(ClientOptions::kMaxClientNameBytes + 1, 'n'),
                                  std::string("trainer \xFF")}) {
    ClientOptions options;
    options.client_name = name;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(worker_.unix_target(), options);
    EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
    EXPECT_THAT(std::string(client.status().message()),
                HasSubstr("ClientOptions::client_name must be UTF-8 text of at most 256 bytes"));
  }
  ClientOptions options;
  options.client_name = std::string(ClientOptions::kMaxClientNameBytes - 2, 'n') + "\xC3\xA4";
  EXPECT_NE(Connect("", options), nullptr) << "256 bytes of text is a name";
}

TEST_F(ClientTest, SecondClientOfAWorkerIsRefused) {
  std::unique_ptr<Client> first = Connect();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> second =
      Client::Connect(worker_.unix_target(), WithConnectTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("already serves client"));
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("give each process its own worker"));
}

TEST_F(ClientTest, SmallAllReduceTravelsInline) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(5);
  AllReduceOptions options;
  options.post_scale = 0.25;
  options.timeout = absl::Seconds(3);
  ASSERT_TRUE(client->AllReduce("grad/fc1", absl::MakeSpan(grad), ReduceOp::kAvg, options).ok());
  EXPECT_EQ(grad, Doubled(Iota(5)));
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "AllReduce");
  EXPECT_TRUE(seen[0].was_inline);
  EXPECT_EQ(seen[0].inline_bytes, 5 * sizeof(float));
  const v1::CollectiveRequest& request = seen[0].request;
  EXPECT_EQ(request.client_sequence(), 1u);
  EXPECT_EQ(request.spec().name(), "grad/fc1");
  EXPECT_EQ(request.spec().dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(request.spec().count(), 5u);
  EXPECT_EQ(request.spec().op(), v1::REDUCE_OP_AVG);
  EXPECT_EQ(request.spec().pre_scale(), 1.0);
  EXPECT_EQ(request.spec().post_scale(), 0.25);
  EXPECT_EQ(request.timeout_ms(), 3000);
}

TEST_F(ClientTest, LargeAllReducesTravelThroughOneReusedSharedMemoryFileRemovedWithTheClient) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(kOneMiBOfFloats);
  ASSERT_TRUE(client->AllReduce("big", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  EXPECT_EQ(grad, Doubled(Iota(kOneMiBOfFloats)));
  std::vector<float> next = Iota(kOneMiBOfFloats);
  ASSERT_TRUE(client->AllReduce("big", absl::MakeSpan(next), ReduceOp::kSum).ok());
  EXPECT_EQ(next, Doubled(Iota(kOneMiBOfFloats)));
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[0].was_inline);
  const v1::SharedTensor& shared = seen[0].request.shared();
  EXPECT_THAT(shared.path(), StartsWith(absl::StrCat("/dev/shm/ringsync-", getpid(), "-")));
  EXPECT_EQ(shared.offset(), 0u);
  EXPECT_EQ(shared.size_bytes(), kOneMiBOfFloats * sizeof(float));
  EXPECT_TRUE(shared.reuse()) << "tells the worker to leave the file";
  EXPECT_TRUE(seen[0].shared_file_existed);
  EXPECT_EQ(seen[1].request.shared().path(), shared.path()) << "the second call reuses it";
  EXPECT_TRUE(std::filesystem::exists(shared.path()));
  client.reset();
  EXPECT_FALSE(std::filesystem::exists(shared.path())) << "removed with the client";
}

TEST_F(ClientTest, SharedMemoryThresholdIsAnOption) {
  std::unique_ptr<Client> client = Connect("", WithThreshold(32));
  ASSERT_NE(client, nullptr);
  std::vector<float> below = Iota(7);  // 28 bytes
  std::vector<float> at = Iota(8);     // 32 bytes
  ASSERT_TRUE(client->AllReduce("below", absl::MakeSpan(below), ReduceOp::kSum).ok());
  ASSERT_TRUE(client->AllReduce("at", absl::MakeSpan(at), ReduceOp::kSum).ok());
  EXPECT_EQ(below, Doubled(Iota(7)));
  EXPECT_EQ(at, Doubled(Iota(8)));
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].was_inline);
  EXPECT_FALSE(seen[1].was_inline);
}

TEST_F(ClientTest, SharedMemoryDirectoryIsAnOption) {
  char dir[] = "/dev/shm/ringsync-client-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ClientOptions options = WithThreshold(32);
  options.shared_memory_dir = dir;
  std::unique_ptr<Client> client = Connect("", options);
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(100);
  ASSERT_TRUE(client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  EXPECT_EQ(grad, Doubled(Iota(100)));
  ASSERT_EQ(worker_.seen().size(), 1u);
  EXPECT_THAT(worker_.seen()[0].request.shared().path(),
              StartsWith(std::string(dir) + "/ringsync-"));
  client.reset();
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove(dir);
}

TEST_F(ClientTest, WithoutSharedMemoryTensorsTravelInline) {
  ClientOptions options = WithThreshold(32);
  options.shared_memory_dir = "/dev/shm/ringsync-client-test-no-such-dir";
  std::unique_ptr<Client> client = Connect("", options);
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(100);
  ASSERT_TRUE(client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  EXPECT_EQ(grad, Doubled(Iota(100)));
  ASSERT_EQ(worker_.seen().size(), 1u);
  EXPECT_TRUE(worker_.seen()[0].was_inline) << "a region that cannot be made is no error";
}

TEST_F(ClientTest, TcpTargetsAlwaysTravelInline) {
  std::unique_ptr<Client> client = Connect(worker_.tcp_target());
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(kOneMiBOfFloats);
  ASSERT_TRUE(client->AllReduce("big", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  EXPECT_EQ(grad, Doubled(Iota(kOneMiBOfFloats)));
  ASSERT_EQ(worker_.seen().size(), 1u);
  EXPECT_TRUE(worker_.seen()[0].was_inline);
}

TEST_F(ClientTest, SequenceFollowsIssueOrderWithManyInFlight) {
  std::unique_ptr<Client> client = Connect("", WithThreshold(4096));
  ASSERT_NE(client, nullptr);
  constexpr int kCollectives = 12;
  std::vector<std::vector<float>> buffers;
  for (int i = 0; i < kCollectives; ++i) buffers.push_back(Iota(i % 2 == 0 ? 3 : 2000));
  std::vector<CollectiveHandle> handles;
  for (int i = 0; i < kCollectives; ++i) {
    worker_.DelayCollective(absl::StrCat("t", i + 1), absl::Milliseconds(5 * (kCollectives - i)));
    handles.push_back(client->AllReduceAsync(absl::StrCat("t", i + 1), absl::MakeSpan(buffers[i]),
                                             ReduceOp::kSum));
    // A call that fails validation takes its turn too, as a refusal (so that the ring
    // fails that collective at once on every rank).
    EXPECT_TRUE(absl::IsInvalidArgument(
        client->AllReduceAsync("", absl::MakeSpan(buffers[i]), ReduceOp::kSum).Wait()));
  }
  for (int i = 0; i < kCollectives; ++i) {
    ASSERT_TRUE(handles[i].Wait().ok()) << i;
    EXPECT_EQ(buffers[i], Doubled(Iota(i % 2 == 0 ? 3 : 2000))) << i;
  }
  for (int attempt = 0; worker_.seen().size() < 2 * kCollectives && attempt < 500; ++attempt) {
    absl::SleepFor(absl::Milliseconds(10));  // the refusals' answers are nobody's to wait for
  }
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), size_t{2 * kCollectives});
  for (const SeenRequest& s : seen) {
    const uint64_t sequence = s.request.client_sequence();
    if (sequence % 2 == 1) {
      EXPECT_EQ(s.request.spec().name(), absl::StrCat("t", (sequence + 1) / 2));
      EXPECT_TRUE(s.request.refused_by_client().empty());
    } else {
      EXPECT_THAT(s.request.refused_by_client(), HasSubstr("name is empty")) << sequence;
    }
  }
}

// The worker failed the collective after writing into the shared region (as a ring that
// broke half way might): the caller's buffer must still be as it was.
class FailureTest : public ClientTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(FailureTest, FailedCollectiveLeavesTheBufferUntouched) {
  const std::string message =
      "collective #4 'boom': rank 2 (worker w2) left generation 3; the ring is re-forming";
  worker_.FailCollective("boom", grpc::Status(grpc::StatusCode::ABORTED, message));
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(GetParam());
  absl::Status status = client->AllReduce("boom", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsAborted(status)) << status;
  EXPECT_EQ(status.message(), message) << "the worker's message reaches the user as it is";
  EXPECT_EQ(grad, Iota(GetParam()));
  EXPECT_FALSE(IsInDoubt(status)) << "the worker did not mark it";
}

TEST_P(FailureTest, AnInDoubtVerdictOfTheWorkerReachesTheCallerMarkedWithTheBufferUntouched) {
  const std::string message =
      "rank 0 (generation 3, collective #4 'boom'): outcome in doubt: this rank completed its "
      "part, but the ring broke before it heard that rank(s) 2 completed theirs";
  worker_.FailCollective("boom", grpc::Status(grpc::StatusCode::UNAVAILABLE, message));
  worker_.MarkOutcome("boom", OutcomeMark::kInDoubt);
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(GetParam());
  absl::Status status = client->AllReduce("boom", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(IsInDoubt(status)) << status;
  EXPECT_FALSE(IsMembershipChanged(status));
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_EQ(status.message(), message);
  EXPECT_EQ(grad, Iota(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(InlineAndShared, FailureTest, ::testing::Values(5, kOneMiBOfFloats));

TEST_F(ClientTest, ShortResultIsAnErrorAndTheBufferIsUntouched) {
  worker_.TruncateResponse("short");
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(4);
  absl::Status status = client->AllReduce("short", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("returned 15 bytes of result, expected 16"));
  EXPECT_EQ(grad, Iota(4));
}

TEST_F(ClientTest, ALostWorkerIsNamedWithRankGenerationAndCollective) {
  worker_.FailCollective("grad", grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed"),
                         /*as_channel=*/true);
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(4);
  absl::Status status = client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              StartsWith("rank 0 (generation 1, collective 'grad' (allreduce 4 x float32 sum)): "
                         "Socket closed (lost the worker at"));
  // The worker may have completed the collective with the ring before its answer was lost.
  EXPECT_TRUE(IsInDoubt(status)) << status;
}

TEST_F(ClientTest, DeadlineExceededSaysWhatToTry) {
  worker_.FailCollective("late", grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                              "collective #1 'late': rank 3 sent nothing for 30s"));
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(4);
  absl::Status status = client->AllReduce("late", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              StartsWith("collective #1 'late': rank 3 sent nothing for 30s"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("raise its timeout"));
}

TEST_F(ClientTest, InvalidArgumentsReachTheWorkerOnlyAsRefusalsThatTakeTheirTurn) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(4);
  std::vector<float> gathered(3);
  AllReduceOptions zero_scale;
  zero_scale.pre_scale = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(client->AllReduce("", absl::MakeSpan(grad), ReduceOp::kSum)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->AllReduce("null", nullptr, 4, DType::kFloat32, ReduceOp::kSum)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->AllReduce("op", grad.data(), 4, DType::kFloat32, static_cast<ReduceOp>(0))));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->AllReduce("scale", absl::MakeSpan(grad), ReduceOp::kSum, zero_scale)));
  EXPECT_TRUE(absl::IsInvalidArgument(client->Broadcast("root", absl::MakeSpan(grad), 2)));
  absl::Status shape = client->AllGather("shape", absl::MakeSpan(grad), absl::MakeSpan(gathered));
  EXPECT_TRUE(absl::IsInvalidArgument(shape)) << shape;
  EXPECT_THAT(std::string(shape.message()), HasSubstr("needs 8 (world size 2 x 4 per rank)"));
  EXPECT_EQ(grad, Iota(4));

  ASSERT_TRUE(client->AllReduce("first", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  // Each refusal went out before the next call: numbered 1..6, without data, saying why.
  for (int attempt = 0; worker_.seen().size() < 7 && attempt < 500; ++attempt) {
    absl::SleepFor(absl::Milliseconds(10));  // the refusals' answers are nobody's to wait for
  }
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 7u);
  std::sort(seen.begin(), seen.end(), [](const SeenRequest& a, const SeenRequest& b) {
    return a.request.client_sequence() < b.request.client_sequence();
  });
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(seen[i].request.client_sequence(), i + 1);
    EXPECT_FALSE(seen[i].request.refused_by_client().empty()) << i;
    EXPECT_FALSE(seen[i].was_inline) << "a refusal carries no data";
    EXPECT_FALSE(seen[i].request.has_shared());
  }
  EXPECT_THAT(seen[5].request.refused_by_client(), HasSubstr("needs 8 (world size 2 x 4"));
  EXPECT_EQ(seen[6].request.client_sequence(), 7u);
  EXPECT_TRUE(seen[6].request.refused_by_client().empty());
}

// Names travel as protobuf strings, which must be UTF-8: a name of other bytes is refused
// by the SDK, and its refusal reaches the worker readable, the name escaped.
TEST_F(ClientTest, ANameThatIsNotUtf8TextIsRefusedAndTheRefusalReachesTheWorkerEscaped) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(4);
  const absl::Status status = client->AllReduce("gr\xFF" "ad", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("name is not UTF-8 text"));
  EXPECT_EQ(grad, Iota(4));
  ASSERT_TRUE(client->AllReduce("gr\xC3\xA4" "d", absl::MakeSpan(grad), ReduceOp::kSum).ok())
      << "a name of UTF-8 beyond ASCII is fine";
  for (int attempt = 0; worker_.seen().size() < 2 && attempt < 500; ++attempt) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 2u);
  std::sort(seen.begin(), seen.end(), [](const SeenRequest& a, const SeenRequest& b) {
    return a.request.client_sequence() < b.request.client_sequence();
  });
  EXPECT_EQ(seen[0].request.spec().name(), "gr\\xff\\x61\\x64");
  EXPECT_THAT(seen[0].request.refused_by_client(), HasSubstr("name is not UTF-8 text"));
  EXPECT_EQ(seen[1].request.spec().name(), "gr\xC3\xA4" "d");
}

TEST_F(ClientTest, EveryElementTypeRoundTrips) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<double> f64 = {1.5, -2.25};
  std::vector<int32_t> i32 = {7, -9};
  std::vector<int64_t> i64 = {int64_t{1} << 40, -3};
  std::vector<int8_t> i8 = {5, -60};
  std::vector<uint8_t> u8 = {100, 3};
  std::vector<uint16_t> f16 = {0x3C00, 0x4000};  // 1.0 and 2.0 as float16 storage
  ASSERT_TRUE(client->AllReduce("f64", absl::MakeSpan(f64), ReduceOp::kMax).ok());
  ASSERT_TRUE(client->AllReduce("i32", absl::MakeSpan(i32), ReduceOp::kMin).ok());
  ASSERT_TRUE(client->AllReduce("i64", absl::MakeSpan(i64), ReduceOp::kProd).ok());
  ASSERT_TRUE(client->AllReduce("i8", absl::MakeSpan(i8), ReduceOp::kSum).ok());
  ASSERT_TRUE(client->AllReduce("u8", absl::MakeSpan(u8), ReduceOp::kSum).ok());
  ASSERT_TRUE(
      client->AllReduce("f16", f16.data(), f16.size(), DType::kFloat16, ReduceOp::kSum).ok());
  EXPECT_EQ(f64, (std::vector<double>{3.0, -4.5}));
  EXPECT_EQ(i32, (std::vector<int32_t>{14, -18}));
  EXPECT_EQ(i64, (std::vector<int64_t>{int64_t{1} << 41, -6}));
  EXPECT_EQ(i8, (std::vector<int8_t>{10, -120}));
  EXPECT_EQ(u8, (std::vector<uint8_t>{200, 6}));
  EXPECT_EQ(f16, (std::vector<uint16_t>{0x3C01, 0x4001}));
  std::vector<v1::DType> dtypes;
  for (const SeenRequest& s : worker_.seen()) dtypes.push_back(s.request.spec().dtype());
  EXPECT_EQ(dtypes, (std::vector<v1::DType>{v1::DTYPE_FLOAT64, v1::DTYPE_INT32, v1::DTYPE_INT64,
                                            v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_FLOAT16}));
}

TEST_F(ClientTest, RawFormsTakeAnyDType) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint16_t> bf16 = {0x3F80, 0x4000};  // 1.0 and 2.0 as bfloat16 storage
  std::vector<uint16_t> all(4);
  ASSERT_TRUE(client->AllGather("gather", bf16.data(), 2, DType::kBFloat16, all.data(), 4).ok());
  EXPECT_EQ(all, (std::vector<uint16_t>{0x3F80, 0x4000, 0x3F80, 0x4000}));
  ASSERT_TRUE(client->Broadcast("from-me", bf16.data(), 2, DType::kBFloat16, 0).ok());
  EXPECT_EQ(bf16, (std::vector<uint16_t>{0x3F80, 0x4000})) << "rank 0 is the root: unchanged";
  std::vector<v1::DType> dtypes;
  for (const SeenRequest& s : worker_.seen()) dtypes.push_back(s.request.spec().dtype());
  EXPECT_EQ(dtypes, (std::vector<v1::DType>{v1::DTYPE_BFLOAT16, v1::DTYPE_BFLOAT16}));
}

TEST_F(ClientTest, ZeroElementsAreFine) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->AllReduce("empty", nullptr, 0, DType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_TRUE(client->AllReduce("empty-span", absl::Span<float>(), ReduceOp::kSum).ok());
  ASSERT_EQ(worker_.seen().size(), 2u);
  EXPECT_EQ(worker_.seen()[1].request.data_case(), v1::CollectiveRequest::DATA_NOT_SET);
  EXPECT_EQ(worker_.seen()[1].request.spec().count(), 0u);
}

TEST_F(ClientTest, AReduceScatterRunOnARingOfAnotherSizeLeavesTheOutputUntouched) {
  PlaceWorkerAt(1, 2);
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  const std::vector<float> input = Iota(8);
  std::vector<float> block(4, -1.0f);
  ASSERT_TRUE(client->ReduceScatter<float>("shard", input, absl::MakeSpan(block), ReduceOp::kSum)
                  .ok());
  EXPECT_EQ(block, std::vector<float>(input.begin() + 4, input.end())) << "rank 1's block";
  EXPECT_EQ(worker_.seen().back().method, "ReduceScatter");
  EXPECT_EQ(worker_.seen().back().request.spec().count(), 8u) << "count is the whole input";

  // The ring grew to 4 ranks before the worker ran it: its block is 2 elements, not 4.
  worker_.RunReduceScattersOnARingOf(4);
  std::fill(block.begin(), block.end(), -1.0f);
  const absl::Status s =
      client->ReduceScatter<float>("shard", input, absl::MakeSpan(block), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("did the ring change size? It had 2 ranks"));
  EXPECT_EQ(block, std::vector<float>(4, -1.0f)) << "the output is untouched";
}

// Rank 1 of 2, its tensors inline or in a file (the threshold param), never staged in
// registered memory: what a rank other than a rooted collective's root sends and takes.
class NotTheRootTest : public ClientTest, public ::testing::WithParamInterface<size_t> {
 protected:
  std::unique_ptr<Client> ConnectAsRankOneOfTwo() {
    PlaceWorkerAt(1, 2);
    ClientOptions options = WithThreshold(GetParam());
    options.stage_in_registered_memory = false;
    options.staging_arena_bytes = 0;
    return Connect("", options);
  }
};

// A scatter's other rank sends none of its own (it has no input), only input_left_out,
// and gets its block.
TEST_P(NotTheRootTest, AScatterSendsNothingAndGetsItsBlock) {
  std::unique_ptr<Client> client = ConnectAsRankOneOfTwo();
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> block(512, 0);
  ASSERT_TRUE(client->Scatter("shards", nullptr, 1024, DType::kUInt8, block.data(), 512, 0).ok());
  EXPECT_EQ(block, std::vector<uint8_t>(512, 0x40)) << "the root's bytes";
  const SeenRequest seen = worker_.seen().back();
  EXPECT_EQ(seen.method, "Scatter");
  EXPECT_TRUE(seen.request.input_left_out());
  EXPECT_EQ(seen.request.spec().count(), 1024u) << "count is the root's whole input";
  if (seen.was_inline) {
    EXPECT_EQ(seen.inline_bytes, 0u) << "the worker makes the room";
  }
}

// A gather's other rank with no output says so (output_left_out) and copies nothing out;
// one with an output gets it back untouched; the root's output receives the result.
TEST_P(NotTheRootTest, AGatherWritesOnlyTheRootsOutputAndARankWithoutOneSaysSo) {
  std::unique_ptr<Client> client = ConnectAsRankOneOfTwo();
  ASSERT_NE(client, nullptr);
  const std::vector<uint8_t> mine(512, 7);
  const absl::Status left_out =
      client->Gather("ids", mine.data(), 512, DType::kUInt8, nullptr, 1024, 0);
  ASSERT_TRUE(left_out.ok()) << left_out;
  SeenRequest seen = worker_.seen().back();
  EXPECT_EQ(seen.method, "Gather");
  EXPECT_TRUE(seen.request.output_left_out());
  EXPECT_EQ(seen.request.spec().count(), 512u) << "count is per rank";
  std::vector<uint8_t> output(1024, 0x5a);
  ASSERT_TRUE(client->Gather("ids", mine.data(), 512, DType::kUInt8, output.data(), 1024, 0).ok());
  EXPECT_EQ(output, std::vector<uint8_t>(1024, 0x5a)) << "not the root: untouched";
  EXPECT_FALSE(worker_.seen().back().request.output_left_out());
  ASSERT_TRUE(client->Gather("ids", mine.data(), 512, DType::kUInt8, output.data(), 1024, 1).ok());
  EXPECT_EQ(output, std::vector<uint8_t>(1024, 7)) << "the root's output";
  const absl::Status empty = client->Gather("none", nullptr, 0, DType::kUInt8, nullptr, 0, 0);
  EXPECT_TRUE(empty.ok()) << "nothing to gather, nothing to take: " << empty;
}

INSTANTIATE_TEST_SUITE_P(InlineAndShared, NotTheRootTest,
                         ::testing::Values(size_t{1} << 20, 1));

// A client of rank 1 of 3 whose tensors of 1 KiB and more are shared; the parameter is a
// size in elements (inline below the threshold, shared above it).
class RankOneOfThreeTest : public ClientTest, public ::testing::WithParamInterface<size_t> {
 protected:
  std::unique_ptr<Client> ConnectAsRankOneOfThree() {
    PlaceWorkerAt(1, 3);
    return Connect("", WithThreshold(1024));
  }
};

class AllGatherTest : public RankOneOfThreeTest {};

TEST_P(AllGatherTest, OutputHoldsEveryRanksInputInRankOrder) {
  std::unique_ptr<Client> client = ConnectAsRankOneOfThree();
  ASSERT_NE(client, nullptr);
  const std::vector<float> params = Iota(GetParam());
  std::vector<float> all(3 * params.size(), -1.0f);
  ASSERT_TRUE(client->AllGather("params", absl::MakeConstSpan(params), absl::MakeSpan(all)).ok());
  std::vector<float> expected;
  for (int r = 0; r < 3; ++r) expected.insert(expected.end(), params.begin(), params.end());
  EXPECT_EQ(all, expected);
  ASSERT_EQ(worker_.seen().size(), 1u);
  const SeenRequest seen = worker_.seen()[0];
  EXPECT_EQ(seen.method, "AllGather");
  EXPECT_EQ(seen.request.spec().count(), params.size()) << "count is per rank";
  if (!seen.was_inline) {
    EXPECT_EQ(seen.request.shared().size_bytes(), all.size() * sizeof(float))
        << "the region holds the whole gathered result";
  }
}

INSTANTIATE_TEST_SUITE_P(InlineAndShared, AllGatherTest, ::testing::Values(4, 1000));

class AllToAllTest : public RankOneOfThreeTest {};

// An all-to-all carries its input whole (count elements, one block per rank) and takes the
// worker's result, in place of the input, into the output: beside the input or over it.
TEST_P(AllToAllTest, SendsItsBlocksAndTakesTheResultIntoTheOutput) {
  std::unique_ptr<Client> client = ConnectAsRankOneOfThree();
  ASSERT_NE(client, nullptr);
  const size_t block = GetParam();
  std::vector<float> tokens = Iota(3 * block);
  std::vector<float> expected;  // the stand-in's: the blocks in reverse order
  for (int q = 2; q >= 0; --q) {
    expected.insert(expected.end(), tokens.begin() + q * block, tokens.begin() + (q + 1) * block);
  }
  std::vector<float> out(tokens.size(), -1.0f);
  ASSERT_TRUE(client->AllToAll<float>("tokens", tokens, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, expected);
  EXPECT_EQ(tokens, Iota(3 * block)) << "the input is the caller's";
  ASSERT_TRUE(client->AllToAll<float>("tokens", tokens, absl::MakeSpan(tokens)).ok());
  EXPECT_EQ(tokens, expected) << "in place";
  const SeenRequest seen = worker_.seen().back();
  EXPECT_EQ(seen.method, "AllToAll");
  EXPECT_EQ(seen.request.spec().count(), 3 * block) << "count is the whole input";
  const absl::Status uneven =
      client->AllToAll("tokens", tokens.data(), 4, DType::kFloat32, out.data(), 4);
  EXPECT_TRUE(absl::IsInvalidArgument(uneven)) << uneven;
  EXPECT_THAT(std::string(uneven.message()), HasSubstr("not one block for each of this ring's 3"));
}

INSTANTIATE_TEST_SUITE_P(InlineAndShared, AllToAllTest, ::testing::Values(4, 1000));

// A worker that does not say it runs uneven all-to-alls (an older ringsync) would take one
// for an even all-to-all: the SDK refuses it, in its turn, so the other ranks fail too.
TEST_F(RankOneOfThreeTest, AnUnevenAllToAllIsRefusedForAWorkerThatHasNone) {
  std::unique_ptr<Client> client = ConnectAsRankOneOfThree();
  ASSERT_NE(client, nullptr);
  std::vector<float> input(3, 1.0f), output(4, -1.0f);
  const absl::Status refused = client->AllToAllV<float>("tokens", input, {1, 1, 1},
                                                        absl::MakeSpan(output), {2, 1, 1});
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("the worker is of an older ringsync, which has no all-to-all of uneven "
                        "blocks"));
  for (int attempt = 0; worker_.seen().empty() && attempt < 500; ++attempt) {
    absl::SleepFor(absl::Milliseconds(10));  // the refusal's answer is nobody's to wait for
  }
  ASSERT_EQ(worker_.seen().size(), 1u);
  EXPECT_THAT(worker_.seen()[0].request.refused_by_client(), HasSubstr("older ringsync"))
      << "its turn taken as a refusal";
  EXPECT_EQ(output, std::vector<float>(4, -1.0f));
}

TEST_F(ClientTest, BroadcastSendsTheRootAndReceivesInPlace) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> weights(6, 0);
  ASSERT_TRUE(client->Broadcast("weights", absl::MakeSpan(weights), 1).ok());
  EXPECT_EQ(weights, std::vector<uint8_t>(6, 0x41));
  ASSERT_EQ(worker_.seen().size(), 1u);
  EXPECT_EQ(worker_.seen()[0].method, "Broadcast");
  EXPECT_EQ(worker_.seen()[0].request.spec().root(), 1);
}

TEST_F(ClientTest, ABroadcastFromAnotherRankLeavesItsInputOutOfSharedMemory) {
  v1::WorkerInfo info = worker_.info();  // rank 0
  info.set_takes_broadcast_without_input(true);
  worker_.SetInfo(info);
  std::unique_ptr<Client> client = Connect("", WithThreshold(32));
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> weights(64, 7), mine(64, 7), small(6, 7);
  ASSERT_TRUE(client->Broadcast("from 1", absl::MakeSpan(weights), 1).ok());
  EXPECT_EQ(weights, std::vector<uint8_t>(64, 0x41)) << "the root's bytes";
  ASSERT_TRUE(client->Broadcast("from me", absl::MakeSpan(mine), 0).ok());
  EXPECT_EQ(mine, std::vector<uint8_t>(64, 7));
  ASSERT_TRUE(client->Broadcast("small", absl::MakeSpan(small), 1).ok());
  const std::vector<SeenRequest> seen = worker_.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_FALSE(seen[0].was_inline);
  EXPECT_TRUE(seen[0].request.input_left_out()) << "rank 0 is not the root: nothing copied in";
  EXPECT_FALSE(seen[1].request.input_left_out()) << "the root's input is the broadcast";
  EXPECT_TRUE(seen[2].was_inline);
  EXPECT_FALSE(seen[2].request.input_left_out()) << "inline data is carried as it is";

  client.reset();
  // The worker serves one client at a time: the next attaches once it saw this one go.
  ASSERT_TRUE(Eventually([&] { return !worker_.attached(); }));
  info.set_takes_broadcast_without_input(false);  // an older worker
  worker_.SetInfo(info);
  std::unique_ptr<Client> older = Connect("", WithThreshold(32));
  ASSERT_NE(older, nullptr);
  ASSERT_TRUE(older->Broadcast("from 1", absl::MakeSpan(weights), 1).ok());
  EXPECT_FALSE(worker_.seen().back().request.input_left_out());
}

TEST_F(ClientTest, BarrierSendsNoData) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Barrier("epoch-end").ok());
  ASSERT_EQ(worker_.seen().size(), 1u);
  const SeenRequest seen = worker_.seen()[0];
  EXPECT_EQ(seen.method, "Barrier");
  EXPECT_EQ(seen.request.spec().count(), 0u);
  EXPECT_EQ(seen.request.data_case(), v1::CollectiveRequest::DATA_NOT_SET)
      << "the worker refuses a barrier that names data, even empty data";
  EXPECT_EQ(seen.request.spec().dtype(), v1::DTYPE_UINT8) << "a valid dtype, for the worker's checks";
}

TEST_F(ClientTest, WaitWithATimeoutLeavesTheCollectiveRunning) {
  worker_.DelayCollective("slow", absl::Milliseconds(400));
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> grad = Iota(3);
  CollectiveHandle handle = client->AllReduceAsync("slow", absl::MakeSpan(grad), ReduceOp::kSum);
  absl::Status early = handle.Wait(absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(early)) << early;
  EXPECT_THAT(std::string(early.message()), HasSubstr("still in flight"));
  EXPECT_FALSE(handle.Ready());
  EXPECT_TRUE(handle.Wait().ok());
  EXPECT_TRUE(handle.Ready());
  EXPECT_TRUE(handle.Wait(absl::Milliseconds(1)).ok()) << "a completed handle answers at once";
  EXPECT_EQ(grad, Doubled(Iota(3)));

  CollectiveHandle moved = std::move(handle);
  EXPECT_TRUE(moved.Wait().ok());
  EXPECT_FALSE(handle.valid());
  EXPECT_TRUE(absl::IsFailedPrecondition(handle.Wait()));
}

TEST_F(ClientTest, RingChangesReachTheClient) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  v1::WorkerInfo info = worker_.info();
  info.set_generation(2);
  info.set_rank(3);
  info.set_world_size(4);
  worker_.SetInfo(info);
  EXPECT_TRUE(Eventually([&] { return client->generation() == 2; }));
  EXPECT_EQ(client->rank(), 3);
  EXPECT_EQ(client->world_size(), 4);
  info.set_ready(false);
  worker_.SetInfo(info);
  EXPECT_TRUE(Eventually([&] { return !client->ready(); }));
}

TEST_F(ClientTest, AMembershipChangeIsItsOwnStatusAndTheNextCollectivesNameTheNewMembership) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  worker_.FailNextForMembershipChange("grad", 5);
  std::vector<float> grad = Iota(4);
  absl::Status failed = client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsAborted(failed)) << failed;
  EXPECT_TRUE(IsMembershipChanged(failed)) << failed;
  EXPECT_FALSE(IsInDoubt(failed));
  EXPECT_EQ(grad, Iota(4)) << "the buffer is untouched";
  // A world of another size: rank, world size and AllGather's output follow it.
  v1::WorkerInfo info = worker_.info();
  info.set_generation(5);
  info.set_world_size(3);
  info.set_rank(2);
  worker_.SetInfo(info);
  ASSERT_TRUE(Eventually([&] { return client->world_size() == 3; }));
  EXPECT_EQ(client->rank(), 2);
  std::vector<float> all(3);
  EXPECT_TRUE(client->AllGather<float>("ids", Iota(1), absl::MakeSpan(all)).ok());
  std::vector<float> too_small(2);
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->AllGather<float>("ids2", Iota(1), absl::MakeSpan(too_small))));
  EXPECT_TRUE(client->AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum).ok());
  std::vector<uint64_t> memberships;
  for (const testing::SeenRequest& seen : worker_.seen()) {
    if (seen.request.spec().name() == "grad") memberships.push_back(seen.request.membership());
  }
  EXPECT_EQ(memberships, (std::vector<uint64_t>{0, 5}))
      << "issued after the caller saw the change: for the new membership";
}

TEST_F(ClientTest, ADetachedClientSaysToReconnect) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  worker_.EndAttach(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker fake-w0 is shutting down"));
  ASSERT_TRUE(Eventually([&] { return !client->ready(); }));
  std::vector<float> grad = Iota(3);
  absl::Status status = client->AllReduce("after", absl::MakeSpan(grad), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("worker fake-w0 is shutting down"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("connect a new Client"));
  EXPECT_TRUE(worker_.seen().empty());
}

TEST_F(ClientTest, DestroyingTheClientCancelsWhatIsInFlight) {
  worker_.DelayCollective("stuck", absl::Seconds(30));
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<float> small = Iota(3);
  std::vector<float> large = Iota(kOneMiBOfFloats);
  CollectiveHandle a = client->AllReduceAsync("stuck", absl::MakeSpan(small), ReduceOp::kSum);
  CollectiveHandle b = client->AllReduceAsync("stuck", absl::MakeSpan(large), ReduceOp::kSum);
  ASSERT_TRUE(Eventually([&] { return worker_.seen().size() == 2; }));
  const SteadyStopwatch start;
  client.reset();
  for (CollectiveHandle* handle : {&a, &b}) {
    absl::Status status = handle->Wait();
    EXPECT_TRUE(absl::IsCancelled(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("Client was destroyed"));
  }
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));
  EXPECT_EQ(small, Iota(3));
  EXPECT_EQ(large, Iota(kOneMiBOfFloats));
  EXPECT_FALSE(std::filesystem::exists(worker_.seen()[1].request.shared().path()));
}

TEST(CollectiveHandleTest, EmptyHandle) {
  CollectiveHandle handle;
  EXPECT_FALSE(handle.valid());
  EXPECT_TRUE(handle.Ready());
  EXPECT_TRUE(absl::IsFailedPrecondition(handle.Wait()));
}

}  // namespace
}  // namespace ringsync
