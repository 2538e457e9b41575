// The two shapes of ringsyncd's log lines (stderr), both carrying the LogContext:
//
//   text (default):  2026-11-29 12:00:00.123 info  [worker w2 rank 2 gen 3] message
//   --log_json:      {"time":"2026-11-29T12:00:00.123Z","level":"info","role":"worker",
//                     "worker_id":"w2","rank":2,"generation":3,"msg":"message"}
//
// (one JSON object per line; worker_id, rank and generation only when known).
#pragma once

#include <memory>

#include "spdlog/formatter.h"

namespace ringsync {

std::unique_ptr<spdlog::formatter> MakeTextLogFormatter();
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

}  // namespace ringsync
