// Where the SDK finds its worker: the user's target string, parsed once.
//
// Thread-safety: a pure function and an immutable value.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringsync::internal {

struct WorkerTarget {
  std::string grpc_target;       // what gRPC dials: "unix:/path" or "host:port"
  std::string unix_socket_path;  // the socket's path; empty for TCP

  bool is_unix() const { return !unix_socket_path.empty(); }
  // How the worker must have been started for this target to reach it, for messages:
  // "`ringsyncd worker` running with --socket=/path" (or "... serving host:port").
  std::string WorkerHint() const;
};

// Accepts "unix:/path", "unix:///path", "/path" (a unix socket) and "host:port",
// "[v6]:port", "dns:..." (TCP). InvalidArgument, naming the accepted forms, otherwise.
absl::StatusOr<WorkerTarget> ParseWorkerTarget(absl::string_view target);

}  // namespace ringsync::internal
