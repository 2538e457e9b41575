// HttpLimits: how much of the HTTP endpoint one client may hold (BoundedHttpServer).
#pragma once

#include "absl/time/time.h"

namespace ringsync {

struct HttpLimits {
  // Connections served at once, a thread each; one more is refused with 503.
  int max_connections = 16;
  // The whole request must arrive within this of the connection being accepted.
  absl::Duration read_timeout = absl::Seconds(5);
  // The whole response must be taken within this of its first byte being sent.
  absl::Duration write_timeout = absl::Seconds(5);
};

}  // namespace ringsync
