#include "daemon/logging/sanitized_text.h"

namespace ringsync {

std::string SanitizeText(absl::string_view text, size_t max_bytes) {
  bool truncated = false;
  if (text.size() > max_bytes) {
    size_t end = max_bytes;
    // Back up over UTF-8 continuation bytes (10xxxxxx) so no character is split.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end);
    truncated = true;
  }
  std::string out(text);
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) c = ' ';
  }
  if (truncated) out += "...";
  return out;
}

}  // namespace ringsync
