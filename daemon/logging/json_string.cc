#include "daemon/logging/json_string.h"

#include "absl/strings/str_format.h"

namespace ringsync {

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string JsonString(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  AppendJsonString(text, &out);
  return out;
}

}  // namespace ringsync
