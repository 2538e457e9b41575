// --port_file: where a ringsyncd role writes the address it bound, so scripts and tests
// that asked for port 0 can find the port. The HTTP endpoint's --http_port_file is
// written the same way.
#pragma once

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"

ABSL_DECLARE_FLAG(std::string, port_file);

namespace ringsync {

// Writes `address` and a newline to `path` atomically: a temporary file in the same
// directory, then rename(2). Readers see either no file or the whole line.
// Errors (Unavailable; InvalidArgument for an empty path) name the file and the reason.
absl::Status WritePortFile(const std::string& path, const std::string& address);

}  // namespace ringsync
