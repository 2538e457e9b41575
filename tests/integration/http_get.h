// A plain HTTP GET of a daemon's page (/metrics, /healthz, ...) for end-to-end tests.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync/steady_deadline.h"
#include "httplib.h"
#include "wire/host_port.h"

namespace ringsync::testing {

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET http://ADDRESS/PATH; status 0 when nothing answered.
// `token`: the daemons' HTTP bearer token (not needed for Prometheus' own pages).
inline HttpReply HttpGet(const std::string& address, const std::string& path,
                         const std::string& token = "") {
  const absl::StatusOr<HostPort> where = ParseHostPort(address, PortUse::kConnect);
  if (!where.ok()) return {};
  httplib::Client client(where->host, where->port);
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(5));
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result result = client.Get(path, headers);
  if (!result) return {};
  return {result->status, result->body};
}

// GETs ADDRESS/PATH every 50 ms until `accept` takes the reply or `timeout` passes; returns
// the last reply. For what the daemons learn each on their own (a new ring view reaches
// every worker at its own moment), so a check of one daemon after another's change waits.
inline HttpReply AwaitHttpGet(const std::string& address, const std::string& path,
                              const std::string& token,
                              const std::function<bool(const HttpReply&)>& accept,
                              absl::Duration timeout = absl::Seconds(10)) {
  const SteadyDeadline deadline(timeout);
  HttpReply reply = HttpGet(address, path, token);
  while (!accept(reply) && !deadline.Passed()) {
    absl::SleepFor(absl::Milliseconds(50));
    reply = HttpGet(address, path, token);
  }
  return reply;
}

}  // namespace ringsync::testing
