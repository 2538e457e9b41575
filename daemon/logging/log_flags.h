// --log_level and --log_json, and the logging set-up they drive, for both ringsyncd roles
// (coordinator and worker).
// Thread-safety: call InitLogging once at start-up, before starting threads.
#pragma once

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(bool, log_json);

namespace ringsync {

// InvalidArgument when --log_level is not one of
// trace, debug, info, warn, error, critical, off.
absl::Status ValidateLogFlags();

// Makes spdlog's default logger write to stderr as
// "2026-11-29 12:00:00.123 info  [coordinator] message" (a worker adds its LogContext:
// "[worker w2 rank 2 gen 3]"), or as JSON lines with --log_json (log_formatter.h), at
// the level --log_level names (info, with a warning, when the flag is invalid; call
// ValidateLogFlags first to refuse).
void InitLogging(absl::string_view role);

}  // namespace ringsync
