// End to end: the paths beside gRPC bytes. Ring neighbours on one machine move segment
// payload through a shared-memory slot ring (--peer_transport=auto, the default) while
// headers, ordering and aborts stay on the gRPC stream; neighbours on other hosts (or any
// with --peer_transport=tcp) send their frames on a TCP data connection beside the stream.
// What must hold: results bit for bit those of the gRPC path, a neighbour that declines
// is served over gRPC, the metrics say which transport each edge uses, a killed worker
// leaves no file behind and fails its neighbours promptly, and a data port reads nothing
// from a connection that does not present its stream's key.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/testing/ring_test_data.h"
#include "gmock/gmock.h"
#include "tests/integration/http_get.h"
#include "ringsync/registered_buffer.h"
#include "tests/integration/cluster_fixture.h"

namespace ringsync {
namespace {

using testing::Bytes;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;
using ::testing::HasSubstr;

struct Case {
  DType dtype;
  size_t count;
};
// One element, several segments (a 64 KiB segment size below), odd sizes. The 1-element
// and 1023-element cases are small enough for the relay algorithm (--algorithm=auto): their
// frames travel as gRPC bytes on a stream whose segments go through the slot ring.
const Case kCases[] = {{DType::kFloat32, 1},        {DType::kFloat32, 300'001},
                       {DType::kFloat64, 100'003},  {DType::kBFloat16, 70'000},
                       {DType::kInt32, 4'000'000},  {DType::kFloat16, 1023}};

// Every case's all-reduce on a cluster started with `flags`: each rank's result.
std::vector<std::vector<Bytes>> RunCases(const std::vector<std::string>& flags, int ranks,
                                         bool registered,
                                         ClusterSecurity security = ClusterSecurity::kMutualTls) {
  std::vector<std::vector<Bytes>> results;
  auto cluster = StartCluster(ranks, flags, {}, /*http=*/false, security);
  if (cluster == nullptr) return results;
  auto clients = ConnectAll(*cluster);
  for (const Case& c : kCases) {
    std::vector<Bytes> out(ranks);
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) -> absl::Status {
      out[r] = testing::RandomInput(c.dtype, c.count, r, /*seed=*/77);
      if (!registered) {
        return client.AllReduce("case", out[r].data(), c.count, c.dtype, ReduceOp::kSum);
      }
      absl::StatusOr<RegisteredBuffer> buffer = client.AllocateBytes(out[r].size());
      if (!buffer.ok()) return buffer.status();
      std::memcpy(buffer->data(), out[r].data(), out[r].size());
      absl::Status s = client.AllReduce("case", buffer->data(), c.count, c.dtype, ReduceOp::kSum);
      std::memcpy(out[r].data(), buffer->data(), out[r].size());
      return s;
    }));
    results.push_back(std::move(out));
  }
  return results;
}

// Every case's result on every rank of `tried` is bit for bit that of `through_grpc`.
void ExpectSameResults(const std::vector<std::vector<Bytes>>& tried,
                       const std::vector<std::vector<Bytes>>& through_grpc) {
  ASSERT_EQ(tried.size(), std::size(kCases));
  ASSERT_EQ(through_grpc.size(), std::size(kCases));
  for (size_t i = 0; i < std::size(kCases); ++i) {
    for (size_t r = 0; r < tried[i].size(); ++r) {
      EXPECT_TRUE(tried[i][r] == through_grpc[i][r])
          << kCases[i].count << " x " << DTypeName(kCases[i].dtype) << ", rank " << r;
    }
  }
}

TEST(SameHostPath, ResultsEqualTheGrpcPathBitForBit) {
  const std::vector<std::string> small_segments = {"--segment_bytes=65536"};
  std::vector<std::string> shm = small_segments, grpc = small_segments;
  shm.push_back("--peer_transport=auto");
  grpc.push_back("--peer_transport=grpc");
  ExpectSameResults(RunCases(shm, 3, /*registered=*/true), RunCases(grpc, 3, /*registered=*/false));
}

TEST(DataConnections, ResultsEqualTheGrpcPathBitForBit) {
  // Under the cluster token records travel in the clear; under mutual TLS (RunCases'
  // default) sealed.
  const std::vector<std::vector<Bytes>> through_grpc =
      RunCases({"--segment_bytes=65536", "--peer_transport=grpc"}, 3, /*registered=*/false);
  ExpectSameResults(RunCases({"--segment_bytes=65536", "--peer_transport=tcp"}, 3,
                             /*registered=*/false, ClusterSecurity::kToken),
                    through_grpc);
  ExpectSameResults(RunCases({"--segment_bytes=65536", "--peer_transport=tcp"}, 3,
                             /*registered=*/false, ClusterSecurity::kMutualTls),
                    through_grpc);
}

std::string Metrics(LocalCluster& cluster, int worker) {
  return testing::HttpGet(cluster.worker_http_address(worker), "/metrics", cluster.http_token()).body;
}

// A 200,000-element float32 sum named `name` on three ranks, rank r contributing
// (i % 97) * (r + 1) at element i; checked on every rank.
void ExpectAThreeRankSum(std::vector<std::unique_ptr<Client>>& clients, const std::string& name) {
  std::vector<std::vector<float>> data(3, std::vector<float>(200'000));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    for (size_t i = 0; i < data[r].size(); ++i) data[r][i] = static_cast<float>(i % 97) * (r + 1);
    return client.AllReduce(name, absl::MakeSpan(data[r]), ReduceOp::kSum);
  }));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r][96], 96.0f * 6) << name << ", rank " << r;
}

// Worker 1 runs with --peer_transport=grpc: it neither offers a slot ring (1 -> 2) nor
// accepts one (0 -> 1 falls back to gRPC bytes); only 2 -> 0 uses shared memory. Results
// are unchanged.
TEST(SameHostPath, ANeighbourThatDeclinesIsServedOverGrpcAndMetricsSaySo) {
  LocalClusterOptions options;
  options.security = ClusterSecurity::kToken;
  options.world_size = 3;
  options.ringsyncd = RINGSYNCD_PATH;
  options.http = true;
  options.worker_flags = {"--segment_bytes=65536"};
  options.worker_flags_of[1] = {"--peer_transport=grpc"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto clients = ConnectAll(**cluster);
  ExpectAThreeRankSum(clients, "mixed");
  const char* kShm = "ringsync_peer_transport{edge=\"next\",transport=\"shm\"} 1";
  const char* kGrpc = "ringsync_peer_transport{edge=\"next\",transport=\"grpc\"} 1";
  EXPECT_THAT(Metrics(**cluster, 0), HasSubstr(kGrpc)) << "0 -> 1: declined";
  EXPECT_THAT(Metrics(**cluster, 1), HasSubstr(kGrpc)) << "1 -> 2: not offered";
  EXPECT_THAT(Metrics(**cluster, 2), HasSubstr(kShm)) << "2 -> 0";
}

// A port no one listens on now (the kernel's choice for a socket closed at once).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t bytes = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), bytes);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &bytes);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Connects to 127.0.0.1:`port`, writes `bytes` and returns whether the worker closed the
// connection within 10 s without answering a byte.
bool ClosedUnanswered(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const timeval ten_seconds{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &ten_seconds, sizeof(ten_seconds));
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
    char answer = 0;
    closed = ::recv(fd, &answer, 1, 0) == 0;
  }
  ::close(fd);
  return closed;
}

// Three workers with --peer_transport=tcp under `security`, worker 0's data port fixed
// at `data_port`.
absl::StatusOr<std::unique_ptr<LocalCluster>> StartOverDataConnections(ClusterSecurity security,
                                                                       int data_port) {
  LocalClusterOptions options;
  options.security = security;
  options.make_certs = RINGSYNC_MAKE_CERTS;
  options.world_size = 3;
  options.ringsyncd = RINGSYNCD_PATH;
  options.http = true;
  options.worker_flags = {"--segment_bytes=65536", "--peer_transport=tcp"};
  options.worker_flags_of[0] = {absl::StrCat("--peer_data_port=", data_port)};
  return LocalCluster::Start(options);
}

void ExpectEveryEdgeOnADataConnection(LocalCluster& cluster) {
  for (int r = 0; r < cluster.world_size(); ++r) {
    EXPECT_THAT(Metrics(cluster, r),
                HasSubstr("ringsync_peer_transport{edge=\"next\",transport=\"tcp\"} 1"))
        << "rank " << r;
  }
}

// Every worker with --peer_transport=tcp: the frames of every edge go on data connections
// (the metrics say tcp), the results are right, and a caller on a data port that does not
// present a key its stream was given — garbage, or the handshake with a made-up key — is
// closed unanswered and counted as a refusal; the ring goes on.
TEST(DataConnections, EveryEdgeUsesOneAndADataPortRefusesAConnectionWithoutItsKey) {
  const int data_port = FreePort();
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      StartOverDataConnections(ClusterSecurity::kToken, data_port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto clients = ConnectAll(**cluster);
  ExpectAThreeRankSum(clients, "before");
  ExpectEveryEdgeOnADataConnection(**cluster);
  EXPECT_TRUE(ClosedUnanswered(data_port, std::string(24, 'x')));
  EXPECT_TRUE(ClosedUnanswered(data_port, "RSDATA1\n" + std::string(16, '\0')));
  const std::string page = Metrics(**cluster, 0);
  EXPECT_THAT(page, HasSubstr("ringsync_refused_total{reason=\"data_connection_not_a_handshake\"} 1"));
  EXPECT_THAT(page, HasSubstr("ringsync_refused_total{reason=\"data_connection_unknown_key\"} 1"));
  ExpectAThreeRankSum(clients, "after");
}

// Under mutual TLS (the default between hosts, `auto`, here forced on one host with
// `tcp`) every edge's frames go on a data connection too, each sealed with a key its TLS
// stream carried: the metrics say tcp, each worker's log says sealed, and a caller on the
// data port without its stream's key is still closed unanswered.
TEST(DataConnections, UnderMutualTlsEveryEdgeUsesASealedOne) {
  const int data_port = FreePort();
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      StartOverDataConnections(ClusterSecurity::kMutualTls, data_port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto clients = ConnectAll(**cluster);
  ExpectAThreeRankSum(clients, "sealed");
  ExpectEveryEdgeOnADataConnection(**cluster);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT((*cluster)->Log((*cluster)->worker_id(r)), HasSubstr("go on a sealed data connection"))
        << "rank " << r;
  }
  EXPECT_TRUE(ClosedUnanswered(data_port, "RSDATA1\n" + std::string(16, '\0')));
  ExpectAThreeRankSum(clients, "after");
}

// On a cluster of 3: an 8 MB all-reduce everywhere, then one on ranks 0 and 2 only,
// during which worker 1 is killed with SIGKILL; the outcomes of ranks 0 and 2.
std::vector<absl::Status> KillRankOneMidCollective(LocalCluster& cluster) {
  auto clients = ConnectAll(cluster);
  std::vector<std::vector<float>> data(3, std::vector<float>(2'000'000, 1.0f));
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& client) {
    return client.AllReduce("warm", absl::MakeSpan(data[r]), ReduceOp::kSum);
  }));
  std::vector<CollectiveHandle> handles;
  for (int r : {0, 2}) {
    handles.push_back(clients[r]->AllReduceAsync("interrupted", absl::MakeSpan(data[r]),
                                                 ReduceOp::kSum));
  }
  cluster.worker(1).Signal(SIGKILL);
  std::vector<absl::Status> outcomes;
  for (CollectiveHandle& handle : handles) outcomes.push_back(handle.Wait());
  return outcomes;
}

// A worker killed mid-collective resets its data connections: its neighbours' collectives
// fail promptly, naming the broken edge, instead of waiting out their deadline.
TEST(DataConnections, AKilledNeighbourFailsTheCollectivePromptly) {
  auto cluster = StartCluster(3, {"--segment_bytes=65536", "--peer_transport=tcp",
                                  "--collective_timeout=60s"},
                              {}, /*http=*/false, ClusterSecurity::kToken);
  ASSERT_NE(cluster, nullptr);
  const absl::Time killed = absl::Now();
  for (const absl::Status& s : KillRankOneMidCollective(*cluster)) {
    EXPECT_FALSE(s.ok()) << "rank 1 never took part";
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1")) << s;
  }
  EXPECT_LT(absl::Now() - killed, absl::Seconds(30)) << "well within --collective_timeout";
}

std::set<std::string> ShmFiles() {
  std::set<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* entry = ::readdir(dir)) names.insert(entry->d_name);
    ::closedir(dir);
  }
  return names;
}

// The slot rings are memfds: no name anywhere, so a worker killed mid-collective (on
// either side of an edge) leaves no file, and the survivors fail promptly.
TEST(SameHostPath, AKilledWorkerLeavesNoFileBehind) {
  const std::set<std::string> before = ShmFiles();
  auto cluster = StartCluster(3, {"--segment_bytes=65536", "--collective_timeout=20s"});
  ASSERT_NE(cluster, nullptr);
  for (const absl::Status& s : KillRankOneMidCollective(*cluster)) {
    EXPECT_FALSE(s.ok()) << "rank 1 never took part";
  }
  std::set<std::string> after = ShmFiles();
  for (const std::string& name : before) after.erase(name);
  // Only names a worker could have made count: a slot ring's, or one carrying a worker's
  // pid. Other processes (this one's SDK pools, tests running beside it) make files too.
  std::vector<std::string> prefixes = {"ringsync-peer-"};
  for (int i = 0; i < 3; ++i) prefixes.push_back(absl::StrCat("ringsync-", cluster->worker(i).pid(), "-"));
  std::erase_if(after, [&](const std::string& name) {
    return std::none_of(prefixes.begin(), prefixes.end(),
                        [&](const std::string& prefix) { return name.rfind(prefix, 0) == 0; });
  });
  EXPECT_TRUE(after.empty()) << "new files in /dev/shm: " << *after.begin();
}

}  // namespace
}  // namespace ringsync
