// HttpEndpoint: the operator's HTTP port of a daemon (--http_listen), served by
// cpp-httplib on a small thread pool of its own, never on a gRPC or ring thread:
//
//   GET /metrics  200, Prometheus text exposition format 0.0.4
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness)
//   GET /readyz   200 "ok" when the daemon can do its job, else 503 and the reason
//                 (worker: in a formed ring of the current generation; coordinator: serving)
//
// Slow or too many clients cannot starve a scrape: see BoundedHttpServer (HttpLimits).
// With a bearer token set, every request must carry "Authorization: Bearer TOKEN"
// (Prometheus: authorization.credentials_file); others get 401 before any handler runs.
//
// Thread-safety: all methods are safe from any thread. The callbacks run on the
// endpoint's threads, possibly several at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/http/http_limits.h"

namespace ringsync {
namespace metrics {
class Refusals;
}
class BoundedHttpServer;

struct HttpEndpointOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free port. IPv6 as [::1]:9400.
  // The body of GET /metrics.
  std::function<std::string()> metrics;
  // GET /readyz: OK answers 200 "ok", an error 503 with its message.
  std::function<absl::Status()> readiness;
  HttpLimits limits;
  // Counts and logs the connections refused (over the limit, too slow). Null: not
  // counted (tests). REQUIRES: outlives the endpoint.
  metrics::Refusals* refusals = nullptr;
  // Required on every request when not empty.
  std::string bearer_token;
};

class HttpEndpoint {
 public:
  // Binds options.listen and starts serving. InvalidArgument for a malformed address,
  // Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(HttpEndpointOptions options);

  ~HttpEndpoint();  // Stop()
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // HOST:PORT as bound (the kernel's port when the listen address asked for 0).
  const std::string& address() const { return address_; }

  // Closes the port and waits for requests in flight. Idempotent.
  void Stop();

 private:
  HttpEndpoint();

  HttpEndpointOptions options_;
  std::unique_ptr<BoundedHttpServer> server_;
  std::string address_;
  std::thread thread_;
};

}  // namespace ringsync
