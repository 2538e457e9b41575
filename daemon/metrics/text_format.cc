#include "daemon/metrics/text_format.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringsync::metrics {
namespace {

std::string Escape(absl::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '"':
        out += quote ? "\\\"" : "\"";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void AppendSample(const std::string& name, const Sample& sample, std::string* out) {
  absl::StrAppend(out, name, sample.suffix);
  if (!sample.labels.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < sample.labels.size(); ++i) {
      if (i > 0) out->push_back(',');
      absl::StrAppend(out, sample.labels[i].first, "=\"", EscapeLabelValue(sample.labels[i].second),
                      "\"");
    }
    out->push_back('}');
  }
  absl::StrAppend(out, " ", FormatValue(sample.value), "\n");
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers below 2^53 are exact in a double: print them as integers.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", value);
  }
  // Plain decimals where they are short enough to read, exponents for the very small
  // and very large; either way the shortest digits that read back as the same double.
  const double magnitude = std::fabs(value);
  const std::chars_format format = magnitude >= 1e-4 && magnitude < 1e15
                                       ? std::chars_format::fixed
                                       : std::chars_format::general;
  char buffer[400];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value, format);
  return std::string(buffer, result.ptr);
}

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quote=*/true); }

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*quote=*/false); }

std::string WriteTextFormat(absl::Span<const FamilySnapshot> families) {
  std::string out;
  for (const FamilySnapshot& family : families) {
    absl::StrAppend(&out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
    absl::StrAppend(&out, "# TYPE ", family.name, " ", MetricTypeName(family.type), "\n");
    for (const Sample& sample : family.samples) AppendSample(family.name, sample, &out);
  }
  return out;
}

}  // namespace ringsync::metrics
