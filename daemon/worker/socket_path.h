// Where the worker's unix socket lives, and the checks that keep another local user from
// squatting it: a socket in a directory someone else controls could be replaced by
// theirs, and the training process would hand its gradients to an impostor.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringsync {

// The default: /tmp/ringsync-<uid>/<worker_id>.sock, in a directory only this user may
// enter (0700). deploy/healthcheck.sh derives the same path; keep them in sync.
std::string DefaultSocketPath(absl::string_view worker_id);

// Makes `path` ready for bind(). With `private_dir` (the default path) its directory is
// created 0700 when missing and must be this user's, 0700. Otherwise the directory must
// be this user's or root's and not writable by everyone unless sticky (as /tmp is). An
// existing `path` must be this user's socket and have no worker serving on it; it is
// then removed (left over by a worker that was killed). FailedPrecondition, naming the
// path, its owner and what to do, otherwise.
absl::Status PrepareSocketPath(const std::string& path, bool private_dir);

}  // namespace ringsync
