#include "daemon/metrics/refusals.h"

#include "absl/strings/str_cat.h"
#include <string_view>

#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace ringsync::metrics {

std::string EscapeForLog(absl::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + 3);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte >= 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    } else {
      out += c;
    }
  }
  if (cut) out += "...";
  return out;
}

Refusals::Refusals(prometheus::Registry& registry, absl::Duration log_interval,
                   std::function<absl::Time()> clock)
    : family_(prometheus::BuildCounter()
                  .Name("ringsync_refused_total")
                  .Help("Input from outside refused (too large, unauthenticated, forged, "
                        "out of sequence), by reason.")
                  .Register(registry)),
      log_interval_(log_interval),
      clock_(std::move(clock)) {}

bool Refusals::Refuse(absl::string_view reason, absl::string_view detail) {
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mutex_);
    Reason& entry = reasons_[reason];
    if (entry.counter == nullptr) entry.counter = &family_.Add({{"reason", std::string(reason)}});
    entry.counter->Increment();
    const absl::Time now = clock_();
    if (now - entry.last_logged < log_interval_) {
      ++entry.not_logged;
      return false;
    }
    entry.last_logged = now;
    suppressed = entry.not_logged;
    entry.not_logged = 0;
  }
  const std::string shown = EscapeForLog(detail, kMaxDetailBytes);
  if (suppressed == 0) {
    spdlog::warn("refused ({}): {}", std::string_view(reason.data(), reason.size()), shown);
  } else {
    spdlog::warn("refused ({}): {} ({} more refusals for this reason not shown)",
                 std::string_view(reason.data(), reason.size()),
                 shown, suppressed);
  }
  return true;
}

uint64_t Refusals::Count(absl::string_view reason) const {
  absl::MutexLock lock(&mutex_);
  const auto it = reasons_.find(reason);
  if (it == reasons_.end()) return 0;
  return static_cast<uint64_t>(it->second.counter->Value());
}

}  // namespace ringsync::metrics
