#include "daemon/http/http_endpoint.h"

#include <sys/socket.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "daemon/http/bounded_http_server.h"
#include "daemon/metrics/refusals.h"
#include "httplib.h"
#include "wire/security/cluster_token.h"

namespace ringsync {
namespace {

constexpr char kPlainText[] = "text/plain; charset=utf-8";
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

absl::Status BadAddress(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("HTTP address '", address, "' ", why,
                                                 "; use HOST:PORT, e.g. 127.0.0.1:9400, "
                                                 "0.0.0.0:9400 or [::1]:9400 (port 0: any free port)"));
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> ParseHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return BadAddress(address, "has no port");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    return BadAddress(address, "is ambiguous (write an IPv6 host in brackets)");
  }
  if (host.empty()) return BadAddress(address, "has no host");
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return BadAddress(address, "has no valid port");
  }
  return std::make_pair(std::string(host), port);
}

HttpEndpoint::HttpEndpoint() = default;

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(HttpEndpointOptions options) {
  absl::StatusOr<std::pair<std::string, int>> host_port = ParseHostPort(options.listen);
  if (!host_port.ok()) return host_port.status();
  const auto& [host, requested_port] = *host_port;

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
  endpoint->address_ = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                                           : absl::StrCat(host, ":", port);
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
