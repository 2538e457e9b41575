// LogContext: who speaks in this process's log lines. A worker sets its id at start-up
// and its rank and generation whenever the ring view changes; every log line then
// carries them ("[worker w2 rank 2 gen 3]", or fields of a JSON line), so lines of
// several workers can be merged and still read.
//
// Thread-safety: all functions are safe from any thread; the formatter reads the
// context under a mutex for every line.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace ringsync {

struct LogContext {
  std::string worker_id;    // empty: not a worker (the coordinator)
  int rank = -1;            // -1: not in a ring
  uint64_t generation = 0;  // 0: no ring view yet
};

void SetLogWorkerId(absl::string_view worker_id);
void SetLogRing(int rank, uint64_t generation);
LogContext CurrentLogContext();

// " w2 rank 2 gen 3", " w2 gen 4" (not in the ring), "" (no worker id): what text log
// lines put after the role's name.
std::string LogContextSuffix(const LogContext& context);

}  // namespace ringsync
