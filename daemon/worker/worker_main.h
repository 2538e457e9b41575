// `ringsyncd worker`: flags, wiring and signal handling of the worker role.
#pragma once

namespace ringsync {

// Runs the worker until SIGINT/SIGTERM. Returns the process exit code.
int RunWorkerMain();

}  // namespace ringsync
