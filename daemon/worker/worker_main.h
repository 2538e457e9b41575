// `ringsyncd worker`: flags, wiring and signal handling of the worker role.
#pragma once

namespace ringsync {

// REQUIRES: absl::ParseCommandLine ran, and no threads were started yet (SIGINT and
// SIGTERM are blocked process-wide and taken with sigwait). Runs the worker until
// SIGINT or SIGTERM. Returns the exit code: 0 after a signal, 1 when start-up failed,
// 2 for bad flags.
int RunWorkerMain();

}  // namespace ringsync
