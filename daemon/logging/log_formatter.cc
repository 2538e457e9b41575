#include "daemon/logging/log_formatter.h"

#include <chrono>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/logging/json_string.h"
#include "daemon/logging/log_context.h"
#include "spdlog/pattern_formatter.h"

namespace ringsync {
namespace {

void Append(const std::string& text, spdlog::memory_buf_t& dest) {
  dest.append(text.data(), text.data() + text.size());
}

// %* in the text pattern: the LogContext suffix (" w2 rank 2 gen 3").
class ContextFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    Append(LogContextSuffix(CurrentLogContext()), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ContextFlag>();
  }
};

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const int millis = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    std::string line = absl::StrFormat(
        "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":", utc.tm_year + 1900,
        utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
    const auto level = spdlog::level::to_string_view(msg.level);
    AppendJsonString(absl::string_view(level.data(), level.size()), &line);
    line += ",\"role\":";
    AppendJsonString(absl::string_view(msg.logger_name.data(), msg.logger_name.size()), &line);
    const LogContext context = CurrentLogContext();
    if (!context.worker_id.empty()) {
      line += ",\"worker_id\":";
      AppendJsonString(context.worker_id, &line);
    }
    if (context.rank >= 0) absl::StrAppend(&line, ",\"rank\":", context.rank);
    if (context.generation > 0) absl::StrAppend(&line, ",\"generation\":", context.generation);
    line += ",\"msg\":";
    AppendJsonString(absl::string_view(msg.payload.data(), msg.payload.size()), &line);
    line += "}\n";
    Append(line, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeTextLogFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ContextFlag>('*').set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ [%n%*] %v");
  return formatter;
}

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() { return std::make_unique<JsonFormatter>(); }

}  // namespace ringsync
