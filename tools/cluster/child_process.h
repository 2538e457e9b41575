// ChildProcess: a program this process started, stopped for sure when it goes out of
// scope (SIGTERM, then SIGKILL after a grace period). Children also die with their
// parent (PR_SET_PDEATHSIG), so a crashed test or launcher leaves nothing behind.
// Each child leads a process group of its own, and signals go to the whole group: under a
// launcher that ignores them and waits for its program (`unshare --fork`), the program
// gets SIGTERM too, and Stop returns once it is gone, not while it still shuts down.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringsync {

class ChildProcess {
 public:
  // Starts argv[0] with `argv`, stdout and stderr appended to `log_path` (or inherited
  // when empty).
  static absl::StatusOr<ChildProcess> Start(const std::vector<std::string>& argv,
                                            const std::string& log_path);

  ChildProcess() = default;  // no process
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();

  void Signal(int signal_number);
  // Waits for the exit; the exit code (128 + signal for a signal), or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // SIGTERM, then SIGKILL after `grace`; returns the exit code.
  int Stop(absl::Duration grace = absl::Seconds(5));

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

}  // namespace ringsync
