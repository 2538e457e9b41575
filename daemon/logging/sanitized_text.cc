#include "daemon/logging/sanitized_text.h"

#include "core/utf8.h"

namespace ringsync {

std::string SanitizeText(absl::string_view text, size_t max_bytes) {
  const bool truncated = text.size() > max_bytes;
  text = Utf8Prefix(text, max_bytes);  // no character split
  std::string out(text);
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) c = ' ';
  }
  if (truncated) out += "...";
  return out;
}

}  // namespace ringsync
