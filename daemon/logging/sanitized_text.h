// Text from outside (a peer's abort reason, a worker's last error, a refused request's
// field) made safe to store and to write on one log line.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ringsync {

// Free text from outside is cut to this many bytes unless a caller says otherwise.
inline constexpr size_t kMaxTextBytes = 1024;

// Control characters become spaces, and text over `max_bytes` is cut at a UTF-8
// character boundary and marked "...".
std::string SanitizeText(absl::string_view text, size_t max_bytes = kMaxTextBytes);

}  // namespace ringsync
