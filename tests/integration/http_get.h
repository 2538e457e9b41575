// A plain HTTP GET of a daemon's page (/metrics, /healthz, ...) for end-to-end tests.
#pragma once

#include <chrono>
#include <string>

#include "httplib.h"

namespace ringsync::testing {

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET http://ADDRESS/PATH; status 0 when nothing answered.
// `token`: the daemons' HTTP bearer token (not needed for Prometheus' own pages).
inline HttpReply HttpGet(const std::string& address, const std::string& path,
                         const std::string& token = "") {
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(5));
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result result = client.Get(path, headers);
  if (!result) return {};
  return {result->status, result->body};
}

}  // namespace ringsync::testing
