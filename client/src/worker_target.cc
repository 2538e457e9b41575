#include "client/src/worker_target.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "wire/grpc_options.h"

namespace ringsync::internal {

std::string WorkerTarget::WorkerHint() const {
  if (is_unix()) return absl::StrCat("`ringsyncd worker` running with --socket=", unix_socket_path);
  return absl::StrCat("`ringsyncd worker` running and serving clients on ", grpc_target);
}

absl::StatusOr<WorkerTarget> ParseWorkerTarget(absl::string_view target) {
  absl::StatusOr<std::string> normalized = NormalizeTarget(target, PortUse::kConnect);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad worker target '", target, "': ", normalized.status().message(),
                     " (expected unix:/path/to/worker.sock, /path/to/worker.sock or host:port)"));
  }
  WorkerTarget parsed;
  parsed.grpc_target = *std::move(normalized);
  absl::string_view path = parsed.grpc_target;
  if (absl::ConsumePrefix(&path, "unix:")) {
    // "unix:///p" names the absolute path "/p" (URI form); "unix:/p" and "unix:p" name p.
    if (absl::StartsWith(path, "///")) path.remove_prefix(2);
    if (path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad worker target '", target, "': the unix socket path is empty"));
    }
    parsed.unix_socket_path = std::string(path);
  }
  return parsed;
}

}  // namespace ringsync::internal
