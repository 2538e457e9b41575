#include "daemon/transport/grpc/keepalive_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(2),
          "both roles: a gRPC connection without traffic for this long sends a keepalive ping "
          "(10ms..1h). Use the same value on every daemon: a server refuses pings more often "
          "than half of its own value.");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(5),
          "both roles: a connection whose keepalive ping, or sent data (TCP_USER_TIMEOUT), "
          "stays unacknowledged this long is closed as dead (10ms..1h). With --keepalive_time "
          "it bounds how long a half-open connection goes unnoticed. Keep their sum above the "
          "coordinator's --heartbeat_timeout (the lease), so that a cut shorter than the "
          "lease breaks no connection; the lease finds the longer ones.");

namespace ringsync {

absl::StatusOr<KeepaliveSettings> KeepaliveFromFlags() {
  const KeepaliveSettings settings{absl::GetFlag(FLAGS_keepalive_time),
                                   absl::GetFlag(FLAGS_keepalive_timeout)};
  if (absl::Status s = ValidateKeepalive(settings); !s.ok()) return s;
  return settings;
}

}  // namespace ringsync
