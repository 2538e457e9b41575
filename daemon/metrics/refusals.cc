#include "daemon/metrics/refusals.h"

#include <string_view>

#include "daemon/logging/sanitized_text.h"
#include "spdlog/spdlog.h"

namespace ringsync::metrics {

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
  const std::string shown = SanitizeText(detail, kMaxDetailBytes);
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
