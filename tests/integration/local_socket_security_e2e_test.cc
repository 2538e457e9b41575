// The worker's local side, attacked as a process on the same host would:
// through the worker's unix socket (and --client_listen), with the real protocol
// (RawWorkerClient), against real daemons. Each attack is refused with an error that
// says why, the worker keeps running, and the ring then still returns correct sums.
#include <fcntl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sync/steady_stopwatch.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/raw_worker_client.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::InlineSum;
using testing::OnEveryRank;
using testing::RawWorkerClient;
using testing::SharedSum;
using testing::StartCluster;

// The ring still serves: every rank all-reduces {rank + 1, ...} and gets the sum.
void ExpectTheRingServes(std::vector<std::unique_ptr<Client>>& clients, const std::string& name) {
  const int n = static_cast<int>(clients.size());
  std::vector<std::vector<float>> data(n);
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) {
    data[r].assign(1000, static_cast<float>(r + 1));
    return c.AllReduce(name, absl::MakeSpan(data[r]), ReduceOp::kSum);
  }));
  for (int r = 0; r < n; ++r) EXPECT_EQ(data[r][999], n * (n + 1) / 2.0f) << "rank " << r;
}

// A file in /dev/shm as a training process makes one: its space reserved, `count`
// floats of 1.
std::string SharedFile(const std::string& name, size_t count) {
  const std::string path = "/dev/shm/" + name;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(posix_fallocate(fd, 0, static_cast<off_t>(count * sizeof(float))), 0);
  const std::vector<float> ones(count, 1.0f);
  EXPECT_EQ(pwrite(fd, ones.data(), count * sizeof(float), 0),
            static_cast<ssize_t>(count * sizeof(float)));
  close(fd);
  return path;
}

TEST(LocalSocket, AnUnattachedConnectionCannotSubmitLockOutOrUnlinkForTheTrainer) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);  // the trainers, attached
  ExpectTheRingServes(clients, "before");
  const std::string victim = SharedFile(absl::StrCat("ringsync-", getpid(), "-victim"), 1000);

  RawWorkerClient rogue(cluster->worker_target(0));
  // Into the trainer's sequence (its next number is 2), inline and naming its file.
  grpc::Status submitted = rogue.AllReduce(InlineSum("before", 2, std::vector<float>(1000, 7)));
  EXPECT_EQ(submitted.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(submitted.error_message(), HasSubstr("carries no attach token"));
  grpc::Status unlinked = rogue.AllReduce(SharedSum("x", 3, 1000, victim, 0, /*reuse=*/false));
  EXPECT_EQ(unlinked.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(std::filesystem::exists(victim)) << "the worker touched no file for the rogue";
  // A guessed token, and a goodbye on the trainer's behalf.
  rogue.set_token(std::string(64, '0'));
  grpc::Status guessed = rogue.AllReduce(InlineSum("x", 2, {1}));
  EXPECT_EQ(guessed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(guessed.error_message(), HasSubstr("not the attached training process's"));
  EXPECT_EQ(rogue.Detach().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Attaching beside the trainer is refused as before (after the reattach grace).
  RawWorkerClient second(cluster->worker_target(0));
  EXPECT_EQ(second.Attach().error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  ExpectTheRingServes(clients, "after");  // the trainer's sequence is untouched
  EXPECT_THAT(cluster->Log("w0"), HasSubstr("refused (client_not_attached)"));
  std::filesystem::remove(victim);
}

TEST(LocalSocket, TheCleanUpOfADepartedClientUsesItsRealPidNotTheOneItClaims) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  // Another process's file (the coordinator's pid stands for any other training process),
  // and one of this process, the rogue's real pid.
  const std::string others =
      SharedFile(absl::StrCat("ringsync-", cluster->coordinator().pid(), "-theirs"), 16);
  const std::string own = SharedFile(absl::StrCat("ringsync-", getpid(), "-own"), 16);
  {
    RawWorkerClient rogue(cluster->worker_target(0));
    ASSERT_TRUE(rogue.Attach(/*claimed_pid=*/cluster->coordinator().pid()).ok());
    rogue.Leave();
  }
  absl::SleepFor(absl::Milliseconds(500));  // the worker notices the departure
  EXPECT_TRUE(std::filesystem::exists(others)) << "a claimed pid removes nothing";
  EXPECT_FALSE(std::filesystem::exists(own)) << "the peer's real pid is cleaned up";
  EXPECT_THAT(cluster->Log("w0"), HasSubstr(absl::StrCat("on the unix socket, pid ", getpid())));
  std::filesystem::remove(others);

  auto clients = ConnectAll(*cluster);
  ExpectTheRingServes(clients, "after");
}

// A trainer on w0 that speaks the protocol itself beside an SDK trainer on w1: each
// step is issued on both ranks.
struct RawAndSdk {
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<RawWorkerClient> raw;
  std::unique_ptr<Client> sdk;

  explicit RawAndSdk(std::vector<std::string> worker_flags = {}) {
    cluster = StartCluster(2, std::move(worker_flags));
    if (cluster == nullptr) return;
    raw = std::make_unique<RawWorkerClient>(cluster->worker_target(0));
    std::jthread attach([&] { EXPECT_TRUE(raw->Attach().ok()); });
    ClientOptions options;
    options.connect_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Client>> connected =
        Client::Connect(cluster->worker_target(1), options);
    EXPECT_TRUE(connected.ok()) << connected.status();
    if (connected.ok()) sdk = *std::move(connected);
  }

  // Rank 1's part of all-reduce `name` over `count` floats of 2.
  absl::Status SdkStep(const std::string& name, size_t count, float* last = nullptr) {
    std::vector<float> data(count, 2.0f);
    absl::Status status = sdk->AllReduce(name, absl::MakeSpan(data), ReduceOp::kSum);
    if (last != nullptr) *last = data.back();
    return status;
  }
};

TEST(LocalSocket, SharedFilesThatCouldCrashTheWorkerAreRefusedAndTheRingGoesOn) {
  RawAndSdk ring;
  ASSERT_NE(ring.sdk, nullptr);
  const size_t count = 1 << 16;
  const std::string prefix = absl::StrCat("ringsync-", getpid(), "-");

  // Sparse (ftruncate only: a full tmpfs would fail the worker's first write into it).
  const std::string sparse = "/dev/shm/" + prefix + "sparse";
  const int fd = open(sparse.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_EQ(ftruncate(fd, count * sizeof(float)), 0);
  close(fd);
  absl::Status sdk_side;
  {
    std::jthread rank1([&] { sdk_side = ring.SdkStep("sparse", count); });
    grpc::Status refused = ring.raw->AllReduce(SharedSum("sparse", 1, count, sparse));
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused.error_message(), HasSubstr("sparse"));
  }
  EXPECT_THAT(std::string(sdk_side.message()), HasSubstr("sparse")) << "the refusal took its turn";

  // A region larger than the file.
  const std::string small = SharedFile(prefix + "small", count / 2);
  {
    std::jthread rank1([&] { sdk_side = ring.SdkStep("short", count); });
    grpc::Status refused = ring.raw->AllReduce(SharedSum("short", 2, count, small));
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused.error_message(), HasSubstr("exceeds the file's"));
  }

  // Truncated after the worker opened it: queued behind #4, then shrunk, then #4 sent.
  const std::string shrinking = SharedFile(prefix + "shrinking", count);
  {
    std::jthread rank1([&] {
      EXPECT_TRUE(ring.SdkStep("first", 4).ok());
      sdk_side = ring.SdkStep("truncated", count);
    });
    grpc::Status truncated_result;
    std::jthread queued(
        [&] { truncated_result = ring.raw->AllReduce(SharedSum("truncated", 4, count, shrinking)); });
    absl::SleepFor(absl::Milliseconds(300));  // #4's request is queued, its file open
    ASSERT_EQ(truncate(shrinking.c_str(), 4096), 0);
    EXPECT_TRUE(ring.raw->AllReduce(InlineSum("first", 3, {1, 1, 1, 1})).ok());
    queued.join();
    EXPECT_EQ(truncated_result.error_code(), grpc::StatusCode::DATA_LOSS);
    EXPECT_THAT(truncated_result.error_message(), HasSubstr("was truncated to 4096 bytes"));
  }
  EXPECT_THAT(std::string(sdk_side.message()), HasSubstr("truncated")) << "every rank is told";

  // The worker is alive and the ring computes correct sums.
  float last = 0;
  std::jthread rank1([&] { EXPECT_TRUE(ring.SdkStep("after", 1000, &last).ok()); });
  v1::CollectiveResponse response;
  ASSERT_TRUE(ring.raw->AllReduce(InlineSum("after", 5, std::vector<float>(1000, 1)), &response).ok());
  rank1.join();
  EXPECT_EQ(last, 3.0f);
  EXPECT_TRUE(ring.cluster->worker(0).running());
  for (const std::string& path : {sparse, small, shrinking}) std::filesystem::remove(path);
}

TEST(LocalSocket, QueueBoundsAndAMissingSequenceNumberDoNotPinTheWorker) {
  RawAndSdk ring({"--max_queued_jobs=2", "--max_queued_bytes=4096",
                  "--client_sequence_gap_timeout=1s"});
  ASSERT_NE(ring.sdk, nullptr);
  grpc::Status behind_gap_3, behind_gap_5;
  const SteadyStopwatch start;
  {
    // #1 and #2 never come (yet): #3 and #5 wait behind the gap.
    std::jthread third([&] { behind_gap_3 = ring.raw->AllReduce(InlineSum("q", 3, {1})); });
    std::jthread fifth([&] { behind_gap_5 = ring.raw->AllReduce(InlineSum("q", 5, {1})); });
    absl::SleepFor(absl::Milliseconds(200));
    grpc::Status too_many = ring.raw->AllReduce(InlineSum("q", 6, {1}));
    EXPECT_EQ(too_many.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(too_many.error_message(), HasSubstr("--max_queued_jobs=2"));
  }
  EXPECT_EQ(behind_gap_3.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(behind_gap_3.error_message(), HasSubstr("which this client never sent"));
  EXPECT_EQ(behind_gap_5.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(start.Elapsed(), absl::Seconds(10)) << "released long before their deadline";

  grpc::Status too_big = ring.raw->AllReduce(InlineSum("q", 7, std::vector<float>(2048, 1)));
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(too_big.error_message(), HasSubstr("--max_queued_bytes=4096"));

  // #1 and #2 arrive after all: the ring serves them.
  for (uint64_t sequence : {1, 2}) {
    float last = 0;
    std::jthread rank1([&] { EXPECT_TRUE(ring.SdkStep("late", 8, &last).ok()); });
    ASSERT_TRUE(ring.raw->AllReduce(InlineSum("late", sequence, std::vector<float>(8, 1))).ok());
    rank1.join();
    EXPECT_EQ(last, 3.0f);
  }
  EXPECT_THAT(ring.cluster->Log("w0"), HasSubstr("refused (client_queue_full)"));
}

// A port nobody listens on now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

TEST(LocalSocket, SharedMemoryTensorsAreRefusedOverTcp) {
  const std::string tcp = absl::StrCat("127.0.0.1:", FreePort());
  // Insecure: who may reach the TCP port is the transport's check (its own tests); this
  // one is about what an attached TCP client may send.
  auto cluster = StartCluster(1, {"--client_listen=" + tcp}, {}, false, ClusterSecurity::kInsecure);
  ASSERT_NE(cluster, nullptr);
  const std::string file = SharedFile(absl::StrCat("ringsync-", getpid(), "-tcp"), 16);
  RawWorkerClient client(tcp);
  ASSERT_TRUE(client.Attach().ok());
  grpc::Status refused = client.AllReduce(SharedSum("t", 1, 16, file, 0, /*reuse=*/false));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("only from a client on the worker's unix socket"));
  EXPECT_TRUE(std::filesystem::exists(file)) << "nothing was opened or unlinked";
  v1::CollectiveResponse response;
  ASSERT_TRUE(client.AllReduce(InlineSum("t", 2, {5, 6}), &response).ok());
  ASSERT_EQ(response.inline_data().size(), 2 * sizeof(float));
  float result[2];
  std::memcpy(result, response.inline_data().data(), sizeof(result));
  EXPECT_EQ(result[1], 6.0f);
  std::filesystem::remove(file);
}

TEST(LocalSocket, ATensorOverTheInlineLimitTravelsThroughSharedMemoryOnTheSocket) {
  auto cluster = StartCluster(2, {"--max_inline_bytes=1024"});
  ASSERT_NE(cluster, nullptr);
  std::vector<std::unique_ptr<Client>> clients(2);
  for (int r = 0; r < 2; ++r) {
    ClientOptions options;
    options.shared_memory_threshold_bytes = size_t{1} << 30;  // would send 4 KiB inline
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(cluster->worker_target(r), options);
    ASSERT_TRUE(client.ok()) << client.status();
    clients[r] = *std::move(client);
  }
  ExpectAllOk(OnEveryRank(clients, [](int r, Client& c) {
    std::vector<float> grad(1024, static_cast<float>(r + 1));
    absl::Status s = c.AllReduce("big", absl::MakeSpan(grad), ReduceOp::kSum);
    if (s.ok() && grad[1023] != 3.0f) return absl::InternalError("wrong sum");
    return s;
  }));
}

TEST(LocalSocket, ATensorOverTheInlineLimitIsRefusedOnTcpBeforeItIsSent) {
  const std::string tcp = absl::StrCat("127.0.0.1:", FreePort());
  auto cluster = StartCluster(1, {"--client_listen=" + tcp, "--max_inline_bytes=1024"}, {},
                              false, ClusterSecurity::kInsecure);
  ASSERT_NE(cluster, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(tcp);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> big(1024, 1.0f);
  const absl::Status refused = (*client)->AllReduce("big", absl::MakeSpan(big), ReduceOp::kSum);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max_inline_bytes=1024"));
  std::vector<float> small(16, 2.0f);
  EXPECT_TRUE((*client)->AllReduce("small", absl::MakeSpan(small), ReduceOp::kSum).ok());
  EXPECT_EQ(small[0], 2.0f);
}

// Starts a worker on `socket`; returns its exit code and log.
std::pair<int, std::string> StartWorkerOn(const std::string& socket, const std::string& log) {
  absl::StatusOr<ChildProcess> worker = ChildProcess::Start(
      {RINGSYNCD_PATH, "worker", "--insecure", "--coordinator=127.0.0.1:1", "--worker_id=squatted",
       "--peer_listen=127.0.0.1:0", "--join_timeout=5s", "--socket=" + socket},
      log);
  EXPECT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<int> code = worker->Wait(absl::Seconds(20));
  EXPECT_TRUE(code.ok()) << code.status();
  std::ifstream in(log);
  return {code.value_or(-1), std::string(std::istreambuf_iterator<char>(in), {})};
}

TEST(LocalSocket, ASquattedSocketPathIsRefusedAtStart) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to play another user";
  std::string pattern = "/tmp/ringsync-squat-test-XXXXXX";
  const std::string dir = mkdtemp(pattern.data());
  // Another user's file where the socket goes.
  const std::string squatted = dir + "/worker.sock";
  close(open(squatted.c_str(), O_CREAT | O_WRONLY, 0666));
  ASSERT_EQ(chown(squatted.c_str(), 65534, 65534), 0);
  auto [code, log] = StartWorkerOn(squatted, dir + "/first.log");
  EXPECT_NE(code, 0);
  EXPECT_THAT(log, HasSubstr("belongs to uid 65534, not to this worker's uid 0"));
  EXPECT_TRUE(std::filesystem::exists(squatted)) << "another user's file is left alone";

  // Another user's directory.
  const std::string theirs = dir + "/theirs";
  ASSERT_EQ(mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  std::tie(code, log) = StartWorkerOn(theirs + "/worker.sock", dir + "/second.log");
  EXPECT_NE(code, 0);
  EXPECT_THAT(log, HasSubstr("its directory belongs to uid 65534"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringsync
