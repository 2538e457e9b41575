#include "daemon/http/http_endpoint.h"

#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "daemon/http/bounded_http_server.h"
#include "daemon/metrics/refusals.h"
#include "httplib.h"
#include "wire/host_port.h"
#include "wire/security/cluster_token.h"

namespace ringsync {
namespace {

constexpr char kPlainText[] = "text/plain; charset=utf-8";
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

HttpEndpoint::HttpEndpoint() = default;

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(HttpEndpointOptions options) {
  absl::StatusOr<HostPort> listen = ParseHostPort(options.listen, PortUse::kListen);
  if (!listen.ok()) return listen.status();
  const auto& [host, requested_port] = *listen;

  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->options_ = std::move(options);
  metrics::Refusals* refusals = endpoint->options_.refusals;
  endpoint->server_ = std::make_unique<BoundedHttpServer>(
      endpoint->options_.limits, [refusals](absl::string_view reason, absl::string_view detail) {
        if (refusals != nullptr) refusals->Refuse(reason, detail);
      });
  BoundedHttpServer& server = *endpoint->server_;
  // httplib's default also sets SO_REUSEPORT, which would let a second daemon bind the
  // same port and take half of the scrapes. SO_REUSEADDR alone: restarts still bind at once.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  HttpEndpoint* self = endpoint.get();
  server.set_pre_routing_handler([self](const httplib::Request& request,
                                        httplib::Response& response) {
    const std::string& token = self->options_.bearer_token;
    if (token.empty() || BearerMatches(request.get_header_value("Authorization"), token)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (self->options_.refusals != nullptr) {
      self->options_.refusals->Refuse(
          "http_unauthorized",
          absl::StrCat(request.method, " ", request.path, " from ", request.remote_addr,
                       request.has_header("Authorization") ? " with a wrong bearer token"
                                                           : " without a bearer token"));
    }
    response.status = 401;
    response.set_header("WWW-Authenticate", "Bearer");
    response.set_content(
        "this endpoint requires 'Authorization: Bearer TOKEN' with the daemon's "
        "--http_token_file (or --token_file) token\n",
        kPlainText);
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/metrics", [self](const httplib::Request&, httplib::Response& response) {
    response.set_content(self->options_.metrics ? self->options_.metrics() : std::string(),
                         kMetricsContentType);
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", kPlainText);
  });
  server.Get("/readyz", [self](const httplib::Request&, httplib::Response& response) {
    const absl::Status ready =
        self->options_.readiness ? self->options_.readiness() : absl::OkStatus();
    if (ready.ok()) {
      response.set_content("ok\n", kPlainText);
    } else {
      response.status = 503;
      response.set_content(absl::StrCat("not ready: ", ready.message(), "\n"), kPlainText);
    }
  });
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (response.status == 404) {
      response.set_content(absl::StrCat("no such page: ", request.path,
                                        "; try /metrics, /healthz or /readyz\n"),
                           kPlainText);
    }
  });

  int port = requested_port;
  if (requested_port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, requested_port)) {
    port = -1;
  }
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve HTTP on ", endpoint->options_.listen,
        " (address in use, or not an address of this machine?); pick another --http_listen"));
  }
  endpoint->address_ = HostPort{host, port}.ToString();
  endpoint->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  // Stop() only works on a running server: wait until the thread got there.
  const SteadyDeadline deadline(absl::Seconds(5));
  while (!server.is_running() && !deadline.Passed()) absl::SleepFor(absl::Milliseconds(1));
  return endpoint;
}

void HttpEndpoint::Stop() {
  if (!thread_.joinable()) return;
  const SteadyDeadline deadline(absl::Seconds(5));
  while (!server_->is_running() && !deadline.Passed()) absl::SleepFor(absl::Milliseconds(1));
  server_->stop();
  thread_.join();
}

}  // namespace ringsync
