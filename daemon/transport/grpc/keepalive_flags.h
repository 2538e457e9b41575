// --keepalive_time and --keepalive_timeout, shared by both ringsyncd roles: how every
// gRPC connection of the daemon (peer streams, the coordinator's sessions, the training
// process's calls) notices a silent other end — a killed host, a cut link, half-open TCP.
#pragma once

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "wire/grpc_options.h"

ABSL_DECLARE_FLAG(absl::Duration, keepalive_time);
ABSL_DECLARE_FLAG(absl::Duration, keepalive_timeout);

namespace ringsync {

// The flags' values; InvalidArgument naming the flag when one is out of range.
absl::StatusOr<KeepaliveSettings> KeepaliveFromFlags();

}  // namespace ringsync
