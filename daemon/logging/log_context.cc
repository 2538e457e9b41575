#include "daemon/logging/log_context.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ringsync {
namespace {

struct State {
  absl::Mutex mu;
  LogContext context ABSL_GUARDED_BY(mu);
};

State& GetState() {
  static State* const state = new State();  // never destroyed: logging may run at exit
  return *state;
}

}  // namespace

void SetLogWorkerId(absl::string_view worker_id) {
  State& state = GetState();
  absl::MutexLock lock(&state.mu);
  state.context.worker_id = std::string(worker_id);
}

void SetLogRing(int rank, uint64_t generation) {
  State& state = GetState();
  absl::MutexLock lock(&state.mu);
  state.context.rank = rank;
  state.context.generation = generation;
}

LogContext CurrentLogContext() {
  State& state = GetState();
  absl::MutexLock lock(&state.mu);
  return state.context;
}

std::string LogContextSuffix(const LogContext& context) {
  if (context.worker_id.empty()) return "";
  std::string suffix = absl::StrCat(" ", context.worker_id);
  if (context.rank >= 0) absl::StrAppend(&suffix, " rank ", context.rank);
  if (context.generation > 0) absl::StrAppend(&suffix, " gen ", context.generation);
  return suffix;
}

}  // namespace ringsync
