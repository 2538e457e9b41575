// End to end, as an operator sees a cluster: every daemon's /metrics passes promtool, a
// real Prometheus server scrapes a 4-worker cluster and reports exactly the collectives
// and ring bytes that happened, ringsyncctl's table matches the cluster, and /readyz and
// the health checks follow a worker's death.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/sync/steady_deadline.h"
#include "gmock/gmock.h"
#include "httplib.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/http_get.h"
#include "core/testing/read_file.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using testing::ConnectAll;
using testing::AwaitHttpGet;
using testing::HttpGet;
using testing::HttpReply;
using testing::ExpectAllOk;
using testing::OnEveryRank;

constexpr int kWorld = 4;

std::unique_ptr<LocalCluster> StartHttpCluster(std::vector<std::string> coordinator_flags = {}) {
  return testing::StartCluster(kWorld, {"--collective_timeout=20s"}, std::move(coordinator_flags),
                               /*http=*/true);
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Pipes `page` into `promtool check metrics`.
CommandResult Promtool(const std::string& page, const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".metrics";
  std::ofstream(path) << page;
  return RunShell(absl::StrCat(PROMTOOL_PATH, " check metrics < ", path));
}

// Percent-encodes everything but letters and digits (a PromQL query in a URL).
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// A port nobody listens on right now (bind to 0, read it, close).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A Prometheus server in its own temporary directory, scraping every second; stopped by
// PID and its directory removed when this goes out of scope.
class PrometheusServer {
 public:
  // `token`: the bearer token the daemons' HTTP ports require.
  PrometheusServer(const std::vector<std::string>& coordinator_targets,
                   const std::vector<std::string>& worker_targets, const std::string& token) {
    char pattern[] = "/tmp/ringsync-prometheus-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return;
    dir_ = pattern;
    auto quoted = [](const std::vector<std::string>& targets) {
      std::vector<std::string> out;
      for (const std::string& t : targets) out.push_back(absl::StrCat("'", t, "'"));
      return absl::StrJoin(out, ", ");
    };
    std::ofstream(dir_ + "/token") << token << "\n";
    const std::string authorization =
        absl::StrCat("    authorization: {credentials_file: '", dir_, "/token'}\n");
    std::ofstream(dir_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        << "scrape_configs:\n"
        << "  - job_name: ringsync-coordinator\n" << authorization
        << "    static_configs:\n      - targets: [" << quoted(coordinator_targets) << "]\n"
        << "  - job_name: ringsync-worker\n" << authorization
        << "    static_configs:\n      - targets: [" << quoted(worker_targets) << "]\n";
    address_ = absl::StrCat("127.0.0.1:", FreePort());
    const std::vector<std::string> argv = {PROMETHEUS_PATH,
                                           "--config.file=" + dir_ + "/prometheus.yml",
                                           "--storage.tsdb.path=" + dir_ + "/data",
                                           "--web.listen-address=" + address_,
                                           "--log.level=warn"};
    absl::StatusOr<ChildProcess> process = ChildProcess::Start(argv, dir_ + "/prometheus.log");
    if (process.ok()) process_ = *std::move(process);
  }

  ~PrometheusServer() {
    if (process_.pid() > 0) process_.Stop(absl::Seconds(5));
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  bool AwaitReady(absl::Duration timeout) {
    const SteadyDeadline deadline(timeout);
    while (!deadline.Passed()) {
      if (HttpGet(address_, "/-/ready").status == 200) return true;
      if (!process_.running()) return false;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  // The value of the first series `promql` returns; nullopt when none.
  std::optional<double> Query(const std::string& promql) {
    const HttpReply reply =
        HttpGet(address_, "/api/v1/query?query=" + UrlEncode(promql));
    last_reply_ = reply.body;
    // {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[1700000000.1,"42"]}]}}
    static const std::regex kValue(R"re("value":\[[0-9.e+]+,"([^"]+)"\])re");
    std::smatch match;
    double value = 0;
    if (reply.status != 200 || !std::regex_search(reply.body, match, kValue) ||
        !absl::SimpleAtod(match[1].str(), &value)) {
      return std::nullopt;
    }
    return value;
  }

  // Polls `promql` until `accept` takes its value; returns the last value seen.
  std::optional<double> AwaitValue(const std::string& promql,
                                   const std::function<bool(double)>& accept,
                                   absl::Duration timeout = absl::Seconds(15)) {
    const SteadyDeadline deadline(timeout);
    std::optional<double> value;
    while (!deadline.Passed()) {
      value = Query(promql);
      if (value.has_value() && accept(*value)) return value;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return value;
  }

  std::string Log() const { return ReadFile(dir_ + "/prometheus.log"); }
  const std::string& last_reply() const { return last_reply_; }

 private:
  std::string dir_;
  std::string address_;
  ChildProcess process_;
  std::string last_reply_;
};

TEST(Observability, PrometheusScrapesEveryDaemonAndSeesExactlyWhatTheRingDid) {
  auto cluster = StartHttpCluster();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::string> workers;
  for (int i = 0; i < kWorld; ++i) workers.push_back(cluster->worker_http_address(i));
  // Start Prometheus first: it boots while the ring forms and the collectives run.
  PrometheusServer prometheus({cluster->coordinator_http_address()}, workers,
                              cluster->http_token());

  auto clients = ConnectAll(*cluster);
  constexpr int kIterations = 5;
  constexpr size_t kElements = 1 << 18;  // 1 MiB of float32, divisible by 4 ranks
  constexpr double kBytes = kElements * sizeof(float);
  for (int i = 0; i < kIterations; ++i) {
    ExpectAllOk(OnEveryRank(clients, [&](int r, Client& c) {
      std::vector<float> grad(kElements, static_cast<float>(r));
      return c.AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
    }));
  }

  // (a) every daemon's page passes promtool, and liveness / readiness answer 200.
  std::vector<std::pair<std::string, std::string>> daemons = {
      {"coordinator", cluster->coordinator_http_address()}};
  for (int i = 0; i < kWorld; ++i) daemons.emplace_back(cluster->worker_id(i), workers[i]);
  for (const auto& [name, address] : daemons) {
    const HttpReply page = HttpGet(address, "/metrics", cluster->http_token());
    ASSERT_EQ(page.status, 200) << name;
    const CommandResult lint = Promtool(page.body, cluster->directory(), name);
    EXPECT_EQ(lint.exit_code, 0) << name << ": " << lint.output << "\n" << page.body;
    EXPECT_EQ(lint.output, "") << name;
    EXPECT_EQ(HttpGet(address, "/healthz", cluster->http_token()).status, 200) << name;
    EXPECT_EQ(HttpGet(address, "/readyz", cluster->http_token()).status, 200) << name;
  }
  EXPECT_THAT(HttpGet(workers[0], "/metrics", cluster->http_token()).body,
              HasSubstr("ringsync_collectives_total{dtype=\"float32\",kind=\"allreduce\","
                        "result=\"ok\"} 5\n"));

  // (b) what Prometheus scraped.
  ASSERT_TRUE(prometheus.AwaitReady(absl::Seconds(20))) << prometheus.Log();
  const auto equals = [](double want) { return [want](double v) { return v == want; }; };
  EXPECT_EQ(prometheus.AwaitValue("count(up == 1)", equals(kWorld + 1)), kWorld + 1)
      << prometheus.last_reply() << prometheus.Log();
  EXPECT_EQ(prometheus.AwaitValue(
                "sum(ringsync_collectives_total{job=\"ringsync-worker\",kind=\"allreduce\",result=\"ok\"})",
                equals(kWorld * kIterations)),
            kWorld * kIterations)
      << prometheus.last_reply();
  EXPECT_EQ(prometheus.Query("sum(ringsync_collectives_failed_total) or vector(0)"), 0);
  // 1 MiB plain spans: staged in registered memory by the SDK, reduced there.
  EXPECT_EQ(prometheus.Query("sum(ringsync_collective_data_total{path=\"registered\"})"),
            kWorld * kIterations);
  // Each rank sends and receives 2(N-1)/N x S per all-reduce; S splits evenly here.
  const double per_rank = kIterations * kBytes * 2 * (kWorld - 1) / kWorld;
  for (const char* metric : {"ringsync_ring_bytes_sent_total", "ringsync_ring_bytes_received_total"}) {
    EXPECT_EQ(prometheus.Query(absl::StrCat("min(", metric, ")")), per_rank) << metric;
    EXPECT_EQ(prometheus.Query(absl::StrCat("max(", metric, ")")), per_rank) << metric;
    EXPECT_EQ(prometheus.Query(absl::StrCat("count(", metric, ")")), kWorld) << metric;
  }
  EXPECT_EQ(prometheus.Query("count(ringsync_busbw_bytes_per_second{size_class=\"<16MiB\"} > 0)"),
            kWorld);
  EXPECT_EQ(prometheus.Query("sum(ringsync_collective_duration_seconds_count{kind=\"allreduce\"})"),
            kWorld * kIterations);
  EXPECT_EQ(prometheus.Query("sum(ringsync_ring_ready)"), kWorld);
  EXPECT_EQ(prometheus.Query("max(ringsync_ring_world_size)"), kWorld);
  EXPECT_EQ(prometheus.Query("ringsync_coordinator_ring_formed"), 1);
  EXPECT_EQ(prometheus.Query("ringsync_coordinator_workers_joined"), kWorld);
  EXPECT_EQ(prometheus.Query("ringsync_coordinator_joins_total"), kWorld);
  EXPECT_EQ(prometheus.Query("count(ringsync_coordinator_heartbeat_age_seconds < 5)"), kWorld);
  EXPECT_EQ(prometheus.Query("count(process_resident_memory_bytes > 0)"), kWorld + 1);
}

// One row of `ringsyncctl status` for worker i, as a pattern.
std::string RowPattern(LocalCluster& cluster, int i) {
  std::string peer = ReadFile(cluster.directory() + "/" + cluster.worker_id(i) + ".port");
  peer.erase(peer.find_last_not_of('\n') + 1);
  // JOINED FROM: the address the coordinator saw its Join come from.
  return absl::StrCat("\n", i, " +", cluster.worker_id(i), " +[0-9a-f]{16} +", peer,
                      " +127\\.0\\.0\\.1 +", cluster.worker_http_address(i),
                      " +yes +[0-9.]+s +1 +([0-9]+) +([0-9]+) +rank [0-9] \\(generation 1, [^\n]+\n");
}

TEST(Observability, RingsyncctlAndReadyzFollowTheClusterAndAWorkersDeath) {
  // A short heartbeat timeout, though a killed worker's broken watch stream is noticed at once.
  auto cluster = StartHttpCluster({"--heartbeat_timeout=3s", "--heartbeat_interval=200ms"});
  ASSERT_NE(cluster, nullptr);
  auto clients = ConnectAll(*cluster);
  for (int i = 0; i < 3; ++i) {
    ExpectAllOk(OnEveryRank(clients, [&](int, Client& c) {
      std::vector<float> grad(1000, 1.0f);
      return c.AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
    }));
  }
  // One collective whose ranks disagree: it fails everywhere, counted with its cause.
  for (const absl::Status& s : OnEveryRank(clients, [&](int r, Client& c) {
         std::vector<float> grad(r == 1 ? 999 : 1000, 1.0f);
         return c.AllReduce("grad", absl::MakeSpan(grad), ReduceOp::kSum);
       })) {
    EXPECT_FALSE(s.ok());
  }
  for (int i = 0; i < kWorld; ++i) {
    EXPECT_THAT(HttpGet(cluster->worker_http_address(i), "/metrics", cluster->http_token()).body,
                HasSubstr("ringsync_collectives_failed_total{cause=\"mismatch\",kind=\"allreduce\"} 1\n"))
        << cluster->worker_id(i);
    EXPECT_THAT(cluster->Log(cluster->worker_id(i)), HasSubstr("collective failed (cause mismatch)"));
  }
  // ringsyncctl presents a client certificate of the cluster's CA.
  const std::string ctl = absl::StrCat(RINGSYNCCTL_PATH, " ",
                                       absl::StrJoin(cluster->client_credentials().Flags(), " "));
  const std::string coordinator = cluster->coordinator_address();

  // (d) The table: one row per worker in rank order, 3 collectives done and 1 failed once
  // heartbeats carried them.
  CommandResult status;
  const SteadyDeadline deadline(absl::Seconds(10));
  bool all_done = false;
  while (!all_done && !deadline.Passed()) {
    status = RunShell(absl::StrCat(ctl, " status --coordinator=", coordinator));
    all_done = status.exit_code == 0;
    for (int i = 0; i < kWorld && all_done; ++i) {
      std::smatch match;
      all_done = std::regex_search(status.output, match, std::regex(RowPattern(*cluster, i))) &&
                 match[1].str() == "3" && match[2].str() == "1";
    }
    if (!all_done) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(all_done) << status.output;
  EXPECT_THAT(status.output,
              HasSubstr(absl::StrCat("coordinator ", coordinator,
                                     ": ring formed, generation 1, 4 of 4 workers joined")));
  std::printf("ringsyncctl status:\n%s", status.output.c_str());
  const CommandResult json = RunShell(absl::StrCat(ctl, " status --json ", coordinator));
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_THAT(json.output, HasSubstr("\"formed\":true"));
  EXPECT_THAT(json.output, HasSubstr("\"worker_id\":\"w3\""));

  // Health: the coordinator and a worker's socket serve; nothing on a free port.
  CommandResult health = RunShell(absl::StrCat(ctl, " health ", coordinator));
  EXPECT_EQ(health.exit_code, 0) << health.output;
  EXPECT_EQ(health.output, coordinator + ": SERVING\n");
  health = RunShell(absl::StrCat(ctl, " health --json ", cluster->worker_target(3)));
  EXPECT_EQ(health.exit_code, 0) << health.output;
  EXPECT_THAT(health.output, HasSubstr("\"serving\":true,\"status\":\"SERVING\""));
  health = RunShell(absl::StrCat(ctl, " health --timeout=1s 127.0.0.1:", FreePort()));
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("UNAVAILABLE: cannot reach"));
  health = RunShell(absl::StrCat(ctl, " health --service=no.such.Service ", coordinator));
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(RunShell(absl::StrCat(ctl, " health")).exit_code, 2);
  EXPECT_EQ(RunShell(absl::StrCat(ctl, " frobnicate")).exit_code, 2);
  const CommandResult no_port = RunShell(absl::StrCat(ctl, " status 127.0.0.1:99999"));
  EXPECT_EQ(no_port.exit_code, 2) << no_port.output;  // at once, not after a connect timeout
  EXPECT_THAT(no_port.output, HasSubstr("'127.0.0.1:99999' is not HOST:PORT: the port must be"));

  // (c) Kill rank 3: its neighbours' /readyz turn 503 naming it, and the table says so.
  ASSERT_EQ(HttpGet(cluster->worker_http_address(0), "/readyz", cluster->http_token()).status, 200);
  cluster->worker(3).Signal(SIGKILL);
  const HttpReply readyz =
      AwaitHttpGet(cluster->worker_http_address(0), "/readyz", cluster->http_token(),
                   [](const HttpReply& reply) { return reply.status == 503; });
  EXPECT_EQ(readyz.status, 503);
  EXPECT_THAT(readyz.body, HasSubstr("not ready: generation 2"));
  EXPECT_THAT(readyz.body, HasSubstr("w3"));
  EXPECT_EQ(HttpGet(cluster->worker_http_address(0), "/healthz", cluster->http_token()).status, 200);
  // Rank 2 learns of generation 2 at its own moment, not rank 0's.
  EXPECT_THAT(AwaitHttpGet(cluster->worker_http_address(2), "/metrics", cluster->http_token(),
                           [](const HttpReply& reply) {
                             return absl::StrContains(reply.body, "ringsync_ring_ready 0\n");
                           })
                  .body,
              HasSubstr("ringsync_ring_ready 0\n"));
  EXPECT_THAT(HttpGet(cluster->coordinator_http_address(), "/metrics", cluster->http_token()).body,
              HasSubstr("ringsync_coordinator_ring_formed 0\n"));
  status = RunShell(absl::StrCat(ctl, " status ", coordinator));
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_THAT(status.output, HasSubstr("ring NOT formed (generation 2: worker w3 (rank 3)"));
  EXPECT_THAT(status.output, HasSubstr("3 of 4 workers joined"));
  health = RunShell(absl::StrCat(ctl, " health --timeout=1s ", cluster->worker_target(3)));
  EXPECT_EQ(health.exit_code, 1) << health.output;
}

}  // namespace
}  // namespace ringsync
