// HttpEndpoint on 127.0.0.1:0 with a real HTTP client: the three pages, readiness
// flipping, unknown pages, bad addresses, a taken port, and a prompt Stop.
#include "daemon/http/http_endpoint.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "absl/time/clock.h"
#include "core/sync/steady_stopwatch.h"
#include "daemon/metrics/refusals.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "wire/host_port.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;

HttpEndpointOptions OptionsFor(std::string listen) {
  HttpEndpointOptions options;
  options.listen = std::move(listen);
  return options;
}

std::unique_ptr<HttpEndpoint> StartOrDie(HttpEndpointOptions options) {
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint = HttpEndpoint::Start(std::move(options));
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? *std::move(endpoint) : nullptr;
}

httplib::Client ClientOf(const HttpEndpoint& endpoint) {
  const absl::StatusOr<HostPort> bound = ParseHostPort(endpoint.address(), PortUse::kConnect);
  return httplib::Client(bound->host, bound->port);
}

TEST(HttpEndpoint, WithABearerTokenRefusesRequestsWithoutIt) {
  prometheus::Registry registry;
  metrics::Refusals refusals(registry);
  HttpEndpointOptions options{"127.0.0.1:0", [] { return std::string("x_total 1\n"); }, nullptr};
  options.bearer_token = "s3cret";
  options.refusals = &refusals;
  auto endpoint = StartOrDie(std::move(options));
  ASSERT_NE(endpoint, nullptr);
  httplib::Client client = ClientOf(*endpoint);

  httplib::Result anonymous = client.Get("/metrics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_THAT(anonymous->body, HasSubstr("requires 'Authorization: Bearer TOKEN'"));
  httplib::Result wrong = client.Get("/healthz", {{"Authorization", "Bearer guess"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  httplib::Result right = client.Get("/metrics", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(right->body, "x_total 1\n");
  EXPECT_EQ(refusals.Count("http_unauthorized"), 2u);
}

TEST(HttpEndpoint, ServesMetricsHealthzAndReadyz) {
  std::atomic<bool> ready{false};
  HttpEndpointOptions options = OptionsFor("127.0.0.1:0");
  options.metrics = [] { return std::string("x_total 1\n"); };
  options.readiness = [&ready] {
    return ready ? absl::OkStatus() : absl::UnavailableError("the ring is not formed");
  };
  auto endpoint = StartOrDie(std::move(options));
  ASSERT_NE(endpoint, nullptr);
  EXPECT_THAT(endpoint->address(), HasSubstr("127.0.0.1:"));
  httplib::Client client = ClientOf(*endpoint);

  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->body, "x_total 1\n");
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  httplib::Result healthz = client.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  EXPECT_EQ(healthz->body, "ok\n");

  httplib::Result not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_EQ(not_ready->body, "not ready: the ring is not formed\n");
  ready = true;
  httplib::Result is_ready = client.Get("/readyz");
  ASSERT_TRUE(is_ready);
  EXPECT_EQ(is_ready->status, 200);

  httplib::Result missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_THAT(missing->body, HasSubstr("/metrics"));
}

TEST(HttpEndpoint, StopClosesThePortPromptlyEvenWithAKeptAliveConnection) {
  auto endpoint = StartOrDie(OptionsFor("127.0.0.1:0"));
  ASSERT_NE(endpoint, nullptr);
  httplib::Client client = ClientOf(*endpoint);
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/healthz"));
  const SteadyStopwatch start;
  endpoint->Stop();
  EXPECT_LT(start.Elapsed(), absl::Seconds(2));
  httplib::Client fresh = ClientOf(*endpoint);
  fresh.set_connection_timeout(std::chrono::seconds(1));
  EXPECT_FALSE(fresh.Get("/healthz"));
  endpoint->Stop();  // idempotent
}

TEST(HttpEndpoint, ATakenPortIsUnavailableNamingTheFlag) {
  auto first = StartOrDie(OptionsFor("127.0.0.1:0"));
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> second =
      HttpEndpoint::Start(OptionsFor(first->address()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("--http_listen"));
}

}  // namespace
}  // namespace ringsync
