// UTF-8 checks for text that travels in protobuf string fields (collective names, the
// messages that quote them): proto3 refuses to parse a string field that is not UTF-8,
// so a name of other bytes would make its request unreadable to the worker instead of
// being refused, with a cause, where it was made.
#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"

namespace ringsync {

// Whether `text` is well-formed UTF-8: every sequence complete, none overlong, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
bool IsValidUtf8(absl::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that ends between two
// sequences (well-formed text cut there stays well-formed).
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace ringsync
