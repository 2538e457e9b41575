// `ringsyncd coordinator`: reads the coordinator's flags (defined in
// coordinator_main.cc; those both roles share in daemon/logging/log_flags.h,
// daemon/process/port_file.h and daemon/http/http_flags.h), serves until SIGINT or
// SIGTERM, then shuts down cleanly.
#pragma once

namespace ringsync {

// REQUIRES: absl::ParseCommandLine ran, and no threads were started yet (SIGINT and
// SIGTERM are blocked process-wide and taken with sigwait). Returns the exit code:
// 0 after a signal, 1 when serving failed, 2 for bad flags.
int RunCoordinatorMain();

}  // namespace ringsync
