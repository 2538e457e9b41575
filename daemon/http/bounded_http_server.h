// BoundedHttpServer: cpp-httplib's Server with what keeps an operator's scrape working
// while other clients misbehave:
//  * at most `max_connections` connections are served at once, each on a thread of its
//    own, so a scrape never queues behind a slow client; one more is refused at once
//    with 503 rather than queued;
//  * a connection must deliver its whole request within `read_timeout` of being
//    accepted (DeadlineStream), so a slow client (slowloris) holds its thread no
//    longer than that; its response must be taken within `write_timeout`;
//  * one request per connection (no keep-alive), with a body of at most 4 KiB (413).
// Each refusal goes to `refuse(reason, detail)`: "http_connection_limit" or
// "http_read_timeout".
//
// Thread-safety: as httplib::Server.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "absl/strings/string_view.h"
#include "daemon/http/http_limits.h"
#include "httplib.h"

namespace ringsync {

class BoundedHttpServer final : public httplib::Server {
 public:
  using RefuseFn = std::function<void(absl::string_view reason, absl::string_view detail)>;

  // REQUIRES: limits.max_connections >= 1, both timeouts > 0.
  BoundedHttpServer(HttpLimits limits, RefuseFn refuse);

 private:
  class ConnectionSlots;

  // httplib calls this for each accepted connection (a private virtual of Server that
  // derived servers may replace, as its SSLServer does).
  bool process_and_close_socket(int sock) override;
  void RefuseConnection(int sock);

  const HttpLimits limits_;
  const RefuseFn refuse_;
  // The thread that runs the refusal of a connection over the limit: the accepting
  // thread, while it runs that connection's task itself instead of queueing it.
  std::atomic<std::thread::id> refusing_on_{};
};

}  // namespace ringsync
