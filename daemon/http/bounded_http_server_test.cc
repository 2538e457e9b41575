// Slow and surplus clients against a real HttpEndpoint on 127.0.0.1:
// slowloris connections do not starve /healthz, /readyz and /metrics, a client too slow
// to send its request is disconnected, and connections over the limit are refused at
// once; both refusals are counted; a request body is never held in memory. Deadlines here are generous: the tests check that
// scrapes are answered, not how fast.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/sync/steady_deadline.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/http/http_endpoint.h"
#include "daemon/metrics/refusals.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "wire/host_port.h"
#include "prometheus/registry.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A raw TCP connection to the endpoint, for clients httplib would not be.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval timeout{10, 0};  // no recv in these tests waits longer
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything until the server closes (or 10 s pass).
  std::string ReadAll() {
    std::string out;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd_, buffer, sizeof(buffer), 0)) > 0;) out.append(buffer, n);
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class BoundedHttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpLimits limits) {
    HttpEndpointOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics = [] { return std::string("x_total 1\n"); };
    options.limits = limits;
    options.refusals = &refusals_;
    absl::StatusOr<std::unique_ptr<HttpEndpoint>> started = HttpEndpoint::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    endpoint_ = *std::move(started);
    port_ = ParseHostPort(endpoint_->address(), PortUse::kConnect)->port;
  }

  // GET `path` with a fresh httplib client; the status, or -1 when nothing came back.
  int Scrape(const std::string& path) {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(std::chrono::seconds(10));
    client.set_read_timeout(std::chrono::seconds(10));
    httplib::Result result = client.Get(path);
    return result ? result->status : -1;
  }

  prometheus::Registry registry_;
  metrics::Refusals refusals_{registry_};
  std::unique_ptr<HttpEndpoint> endpoint_;
  int port_ = 0;
};

TEST_F(BoundedHttpServerTest, SlowClientsDoNotStarveScrapes) {
  Start(HttpLimits{.max_connections = 16, .read_timeout = absl::Seconds(30)});
  // Twice as many slowloris clients as the endpoint used to have threads, each holding
  // a half-sent request open.
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  }
  absl::SleepFor(absl::Milliseconds(200));  // all accepted and waiting for more
  EXPECT_EQ(Scrape("/healthz"), 200);
  EXPECT_EQ(Scrape("/readyz"), 200);
  EXPECT_EQ(Scrape("/metrics"), 200);
}

TEST_F(BoundedHttpServerTest, AClientTooSlowToSendItsRequestIsDisconnectedAndCounted) {
  Start(HttpLimits{.max_connections = 4, .read_timeout = absl::Milliseconds(300)});
  RawClient slow(port_);
  ASSERT_TRUE(slow.connected());
  // A byte every 50 ms never waits long enough for a per-read timeout to fire.
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  const SteadyDeadline give_up(absl::Seconds(10));
  bool disconnected = false;
  for (size_t i = 0; i < request.size() && !disconnected && !give_up.Passed(); ++i) {
    disconnected = !slow.Send(request.substr(i, 1));
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::string answer = slow.ReadAll();
  EXPECT_THAT(answer, ::testing::Not(HasSubstr("x_total")));
  EXPECT_EQ(refusals_.Count("http_read_timeout"), 1u);
  EXPECT_EQ(Scrape("/metrics"), 200);
}

TEST_F(BoundedHttpServerTest, ConnectionsOverTheLimitAreRefusedAtOnceAndCounted) {
  Start(HttpLimits{.max_connections = 2, .read_timeout = absl::Seconds(30)});
  auto first = std::make_unique<RawClient>(port_);
  auto second = std::make_unique<RawClient>(port_);
  ASSERT_TRUE(first->connected() && second->connected());
  absl::SleepFor(absl::Milliseconds(200));  // both accepted, each holding a thread

  RawClient surplus(port_);
  ASSERT_TRUE(surplus.connected());
  const SteadyStopwatch start;
  const std::string answer = surplus.ReadAll();
  EXPECT_LT(start.Elapsed(), absl::Seconds(5));  // refused, not queued
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(answer, HasSubstr("--http_max_connections"));
  EXPECT_EQ(refusals_.Count("http_connection_limit"), 1u);

  first.reset();  // their threads are free again once the server sees them go
  second.reset();
  const SteadyDeadline give_up(absl::Seconds(10));
  int status = -1;
  while ((status = Scrape("/healthz")) != 200 && !give_up.Passed()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(status, 200);
}

TEST_F(BoundedHttpServerTest, ARequestBodyIsRefusedUnreadRatherThanHeldInMemory) {
  // httplib discards a body over the bound until the read deadline ends the connection.
  Start(HttpLimits{.max_connections = 4, .read_timeout = absl::Milliseconds(500)});
  RawClient client(port_);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n"));
  EXPECT_THAT(client.ReadAll(), StartsWith("HTTP/1.1 413"));
  EXPECT_EQ(Scrape("/metrics"), 200);
}

}  // namespace
}  // namespace ringsync
