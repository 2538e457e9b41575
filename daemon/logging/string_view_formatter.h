// Lets spdlog/fmt format absl::string_view (status messages) directly: Debian's Abseil
// has its own string_view type, which fmt does not know.
#pragma once

#include "absl/strings/string_view.h"
#include "fmt/format.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  auto format(absl::string_view value, fmt::format_context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(value.data(), value.size()),
                                                    ctx);
  }
};
