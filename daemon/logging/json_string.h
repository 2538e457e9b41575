// JSON string literals for hand-written JSON (log lines, ringsyncctl --json): quotes,
// backslashes and control characters escaped per RFC 8259; other bytes pass through.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace ringsync {

// Appends `text` as a JSON string literal, quotes included.
void AppendJsonString(absl::string_view text, std::string* out);

// `text` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view text);

}  // namespace ringsync
