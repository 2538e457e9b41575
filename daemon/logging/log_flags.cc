#include "daemon/logging/log_flags.h"

#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "daemon/logging/log_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, log_level, "info",
          "Log level: trace, debug, info, warn, error, critical or off. At info, one line "
          "per event (join, refusal, ring view, lost worker); debug adds per-request detail.");
ABSL_FLAG(bool, log_json, false,
          "Write log lines as JSON objects, one per line (time, level, role, worker_id, rank, "
          "generation, msg), for log collectors; default: text lines.");

namespace ringsync {
namespace {

std::optional<spdlog::level::level_enum> ParseLevel(absl::string_view name) {
  static constexpr struct {
    absl::string_view name;
    spdlog::level::level_enum level;
  } kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  };
  for (const auto& entry : kLevels) {
    if (entry.name == name) return entry.level;
  }
  return std::nullopt;
}

}  // namespace

absl::Status ValidateLogFlags() {
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (!ParseLevel(level)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log_level='", level,
        "' is not a log level; use trace, debug, info, warn, error, critical or off"));
  }
  return absl::OkStatus();
}

void InitLogging(absl::string_view role) {
  const bool json = absl::GetFlag(FLAGS_log_json);
  spdlog::sink_ptr sink;
  if (json) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  auto logger = std::make_shared<spdlog::logger>(std::string(role), std::move(sink));
  logger->set_formatter(json ? MakeJsonLogFormatter() : MakeTextLogFormatter());
  const std::string level_name = absl::GetFlag(FLAGS_log_level);
  const std::optional<spdlog::level::level_enum> level = ParseLevel(level_name);
  logger->set_level(level.value_or(spdlog::level::info));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  if (!level) {
    spdlog::warn("unknown --log_level '{}' (use trace, debug, info, warn, error, critical or "
                 "off); logging at info",
                 level_name);
  }
}

}  // namespace ringsync
