// End to end, as an attacker would try it against real daemons on loopback: a worker
// with a certificate from another CA, a worker without or with a wrong cluster token, a
// rogue Join with a valid certificate for another name, a rogue ring hello claiming
// another rank — each refused with a message that says why, counted as a refusal, and
// the ring still serving correct results afterwards. Plus certificates rotated on disk
// taking effect without a restart.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/process/unique_fd.h"
#include "daemon/transport/grpc/outbound_stream.h"
#include "gmock/gmock.h"
#include "tests/integration/cluster_fixture.h"
#include "wire/security/transport_security.h"
#include "core/testing/read_file.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::AwaitLogLine;
using testing::ConnectAll;
using testing::ExpectAllOk;
using testing::OnEveryRank;
using testing::StartCluster;

// Runs one more `ringsyncd worker` beside the cluster with `flags` until it gives up
// (a short --join_timeout); returns its exit code and log.
std::pair<int, std::string> RunExtraWorker(LocalCluster& cluster, const std::string& name,
                                           const std::string& worker_id,
                                           const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {RINGSYNCD_PATH,
                                   "worker",
                                   "--coordinator=" + cluster.coordinator_address(),
                                   "--worker_id=" + worker_id,
                                   "--socket=" + cluster.directory() + "/" + name + ".sock",
                                   "--join_timeout=3s"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<ChildProcess*> process = cluster.Spawn(name, argv);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {-1, ""};
  absl::StatusOr<int> exit_code = (*process)->Wait(absl::Seconds(20));
  EXPECT_TRUE(exit_code.ok()) << exit_code.status();
  return {exit_code.ok() ? *exit_code : -1, cluster.Log(name)};
}

std::vector<std::string> TlsFlags(const LocalCluster& cluster, const std::string& ca,
                                  const std::string& name) {
  return {"--tls_ca=" + ca, "--tls_cert=" + cluster.tls_file(name + ".pem"),
          "--tls_key=" + cluster.tls_file(name + ".key")};
}

// Every rank all-reduces 1024 floats of (rank + 1); the sum is known exactly.
void ExpectCorrectAllReduce(std::vector<std::unique_ptr<Client>>& clients) {
  const float n = static_cast<float>(clients.size());
  ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) {
    std::vector<float> grad(1024, static_cast<float>(r + 1));
    absl::Status s = c.AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
    if (s.ok() && grad != std::vector<float>(1024, n * (n + 1) / 2)) {
      return absl::InternalError("wrong sum");
    }
    return s;
  }));
}

TEST(Security, AWorkerWithACertificateFromAnotherCaIsRefusedSayingSo) {
  auto cluster = StartCluster(2);
  ASSERT_NE(cluster, nullptr);
  // A complete, valid set of files — from a CA the cluster does not trust.
  const std::string other = cluster->directory() + "/other-ca";
  ASSERT_EQ(std::system(absl::StrCat(RINGSYNC_MAKE_CERTS, " ", other, " worker/w9 >/dev/null").c_str()), 0);
  const auto [exit_code, log] = RunExtraWorker(
      *cluster, "stranger", "w9",
      {"--tls_ca=" + other + "/ca.pem", "--tls_cert=" + other + "/worker-w9.pem",
       "--tls_key=" + other + "/worker-w9.key"});
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(log, HasSubstr("certificate verify failed"));
  EXPECT_THAT(log, HasSubstr("the TLS handshake failed"));
  auto clients = ConnectAll(*cluster);
  ExpectCorrectAllReduce(clients);
}

TEST(Security, AWorkerWithoutOrWithAWrongTokenIsRefusedSayingSo) {
  auto cluster = StartCluster(2, {}, {}, false, ClusterSecurity::kToken);
  ASSERT_NE(cluster, nullptr);
  const auto [no_token_exit, no_token_log] = RunExtraWorker(*cluster, "anonymous", "w8", {"--insecure"});
  EXPECT_EQ(no_token_exit, 1);
  EXPECT_THAT(no_token_log, HasSubstr("requires the cluster token and the call carried none"));

  const std::string wrong = cluster->directory() + "/wrong.token";
  std::ofstream(wrong) << "not-the-token\n";
  const auto [wrong_exit, wrong_log] =
      RunExtraWorker(*cluster, "guesser", "w9", {"--token_file=" + wrong});
  EXPECT_EQ(wrong_exit, 1);
  EXPECT_THAT(wrong_log, HasSubstr("the call's cluster token is wrong"));

  const std::string coordinator_log = cluster->Log("coordinator");
  EXPECT_THAT(coordinator_log, HasSubstr("refused (no_cluster_token): a call to /ringsync.v1.Coordinator/Join"));
  EXPECT_THAT(coordinator_log, HasSubstr("refused (wrong_cluster_token)"));
  auto clients = ConnectAll(*cluster);
  ExpectCorrectAllReduce(clients);
}

TEST(Security, ARogueJoinWithAValidCertificateForAnotherNameIsRefused) {
  auto cluster = StartCluster(2, {"--collective_timeout=20s"});
  ASSERT_NE(cluster, nullptr);
  // w1 restarts: its rank is free. A holder of a valid certificate for w9 asks for it.
  cluster->worker(1).Stop();
  ASSERT_TRUE(cluster->MakeCertificates({"worker/w9"}).ok());
  const auto [exit_code, log] = RunExtraWorker(
      *cluster, "rogue", cluster->worker_id(1), TlsFlags(*cluster, cluster->tls_file("ca.pem"), "worker-w9"));
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(log, HasSubstr("claims to be worker 'w1' but presented a certificate for "
                             "ringsync://worker/w9"));
  EXPECT_THAT(cluster->Log("coordinator"), HasSubstr("refused (join_identity_mismatch)"));
  // The real w1 comes back and the ring serves correct sums.
  ASSERT_TRUE(cluster->RestartWorker(1).ok());
  auto clients = ConnectAll(*cluster);
  ExpectCorrectAllReduce(clients);
}

TEST(Security, ARoguePeerHelloClaimingAnotherRankIsRefusedAndTheRingStaysCorrect) {
  auto cluster = StartCluster(3, {"--collective_timeout=20s"});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  ExpectCorrectAllReduce(clients);  // generation 1 is formed and serving
  const std::string w1_peer = ReadFile(cluster->directory() + "/w1.port");
  ASSERT_FALSE(w1_peer.empty());
  ASSERT_TRUE(cluster->MakeCertificates({"worker/w9"}).ok());
  auto rogue_security = [&](const std::string& name) {
    TransportSecurityOptions options;
    options.tls_ca = cluster->tls_file("ca.pem");
    options.tls_cert = cluster->tls_file(name + ".pem");
    options.tls_key = cluster->tls_file(name + ".key");
    return TransportSecurity::Create(options).value();
  };
  const WaitLimit limit{SteadyDeadline(absl::Seconds(10)), nullptr};
  const std::string target(absl::StripSuffix(w1_peer, "\n"));

  // Class 1: a valid certificate for w9 claims to be rank 0 (w0), w1's left neighbour.
  absl::StatusOr<std::unique_ptr<OutboundStream>> hijack = OutboundStream::Open(
      target, PeerHello{0, 1, "w0"}, "w1", limit, rogue_security("worker-w9"));
  ASSERT_FALSE(hijack.ok());
  EXPECT_THAT(hijack.status().message(),
              HasSubstr("claims to be worker 'w0' but presented a certificate for ringsync://worker/w9"));

  // A real member (w2, its own certificate) claims a link the view does not give it: on 3
  // ranks rank 2 may send to w1 only on the stride algorithms' link of stride 2, not as
  // w1's left neighbour (the ring link, stride 1, which the hello means when it names no
  // stride).
  absl::StatusOr<std::unique_ptr<OutboundStream>> wrong_rank = OutboundStream::Open(
      target, PeerHello{2, 1, "w2"}, "w1", limit, rogue_security("worker-w2"));
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_THAT(std::string(wrong_rank.status().message()),
              HasSubstr("a ring stream from rank 2 for generation 1 as the link of stride 1, "
                        "where the view has that rank's link to this worker at stride 2"));

  const std::string w1_log = cluster->Log("w1");
  EXPECT_THAT(w1_log, HasSubstr("refused (peer_hello_identity_mismatch)"));
  EXPECT_THAT(w1_log, HasSubstr("refused (peer_hello_not_in_view)"));
  ExpectCorrectAllReduce(clients);
}

TEST(Security, CertificatesRotatedOnDiskTakeEffectWithoutARestart) {
  auto cluster = StartCluster(2, {}, {"--tls_reload_interval=1s"});
  ASSERT_NE(cluster, nullptr);
  // The operator moves to a new CA: new files for the coordinator, written in place.
  const std::string next = cluster->directory() + "/next-ca";
  ASSERT_EQ(std::system(absl::StrCat(RINGSYNC_MAKE_CERTS, " ", next, " coordinator worker/w9 >/dev/null").c_str()), 0);
  const std::vector<std::string> next_worker = {"--tls_ca=" + next + "/ca.pem",
                                                "--tls_cert=" + next + "/worker-w9.pem",
                                                "--tls_key=" + next + "/worker-w9.key"};
  // Before: a worker of the new CA fails the handshake.
  EXPECT_THAT(RunExtraWorker(*cluster, "early", "w9", next_worker).second,
              HasSubstr("certificate verify failed"));
  for (const std::string file : {"ca.pem", "coordinator.key", "coordinator.pem"}) {
    std::filesystem::copy_file(next + "/" + file, cluster->tls_file(file),
                               std::filesystem::copy_options::overwrite_existing);
  }
  absl::SleepFor(absl::Seconds(2));  // two reload intervals
  // After, with no restart: the handshake passes and the coordinator answers the Join
  // itself (the ring of 2 is full).
  const auto [exit_code, log] = RunExtraWorker(*cluster, "late", "w9", next_worker);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(log, ::testing::Not(HasSubstr("certificate verify failed")));
  EXPECT_THAT(log, HasSubstr("w9"));
  EXPECT_THAT(log, ::testing::AnyOf(HasSubstr("full"), HasSubstr("world size")));
  EXPECT_EQ(cluster->coordinator().running(), true);
}

// Workers whose DNS server does not answer (as a container network's while containers
// start) still form their ring: each dials its neighbours at the address the coordinator
// saw them join from, and the TLS handshake still checks the advertised name against the
// neighbour's certificate (make-certs.sh names each worker's id, which is the name
// advertised here). Each name lookup hangs for 10 s, and gRPC queues later lookups behind
// a hung one: dialling by name alone, or the address through gRPC's DNS resolver, took
// tens of seconds.
TEST(Security, NeighboursWhoseNamesDoNotResolveAreDialledWhereTheyJoinedFrom) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount namespace and a port-53 socket need root";
  // A DNS server on loopback that never answers.
  UniqueFd silent_dns(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in dns{};
  dns.sin_family = AF_INET;
  dns.sin_port = htons(53);
  ASSERT_EQ(::inet_pton(AF_INET, "127.0.0.153", &dns.sin_addr), 1);
  ASSERT_EQ(::bind(silent_dns.get(), reinterpret_cast<const sockaddr*>(&dns), sizeof(dns)), 0)
      << "127.0.0.153:53: " << std::strerror(errno);
  constexpr int kWorkers = 4;
  LocalClusterOptions options;
  options.security = ClusterSecurity::kMutualTls;
  options.make_certs = RINGSYNC_MAKE_CERTS;
  options.world_size = kWorkers;
  options.ringsyncd = RINGSYNCD_PATH;
  // Each worker runs with a resolv.conf naming only that server, and advertises its id,
  // which /etc/hosts does not list.
  const std::string no_dns =
      absl::StrCat(::testing::TempDir(), "/ringsync-silent-dns-", ::getpid(), ".conf");
  std::ofstream(no_dns) << "nameserver 127.0.0.153\noptions timeout:5 attempts:2\n";
  const absl::Cleanup remove_no_dns = [&no_dns] { std::filesystem::remove(no_dns); };
  for (int i = 0; i < kWorkers; ++i) {
    options.worker_launcher_of[i] = {"/usr/bin/unshare", "--mount", "--propagation", "private",
                                     "/bin/sh", "-c",
                                     "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"",
                                     no_dns};
    options.worker_flags_of[i] = {absl::StrCat("--advertise_host=w", i)};
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_EQ((*cluster)->worker_id(0), "w0");  // the names the certificates carry
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(**cluster);
  ExpectCorrectAllReduce(clients);
  for (int i = 0; i < kWorkers; ++i) {
    // The links the small all-reduces use (strides 2 and 3 at N=4) are connected once the
    // ring formed, maybe after the all-reduce above.
    EXPECT_TRUE(AwaitLogLine(**cluster, (*cluster)->worker_id(i), "(stride 3) at ipv4:",
                             absl::Seconds(20)))
        << "w" << i;
    const std::string log = (*cluster)->Log((*cluster)->worker_id(i));
    EXPECT_THAT(log, HasSubstr("the address it joined the coordinator from")) << "w" << i;
    EXPECT_THAT(log, HasSubstr("ring formed")) << "w" << i;
    // ... at the first try (--connect_timeout, 30 s): no lookup held it up.
    EXPECT_THAT(log, ::testing::Not(HasSubstr("could not connect the ring"))) << "w" << i;
    // Those dial the address first, without waiting out the name's attempts again.
    for (const char* stride : {"(stride 2)", "(stride 3)"}) {
      EXPECT_THAT(log, HasSubstr(absl::StrCat(stride, " at ipv4:"))) << "w" << i;
      EXPECT_THAT(log, ::testing::Not(HasSubstr(absl::StrCat(stride, " has not answered"))))
          << "w" << i;
    }
  }
}

}  // namespace
}  // namespace ringsync
