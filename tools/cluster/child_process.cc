#include "tools/cluster/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/sync/steady_deadline.h"

namespace ringsync {

absl::StatusOr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                 const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to start");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno)));
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that a signal sent at once finds the group
  if (log_fd >= 0) ::close(log_fd);
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) Stop();
    pid_ = std::exchange(other.pid_, -1);
    exit_code_ = std::exchange(other.exit_code_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Stop();
}

bool ChildProcess::running() { return pid_ > 0 && !Wait(absl::ZeroDuration()).ok(); }

void ChildProcess::Signal(int signal_number) {
  if (pid_ <= 0 || exit_code_.has_value()) return;
  if (::kill(-pid_, signal_number) != 0) ::kill(pid_, signal_number);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (exit_code_.has_value()) return *exit_code_;
  if (pid_ <= 0) return absl::FailedPreconditionError("no process");
  const SteadyDeadline deadline(timeout);
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return *exit_code_;
    }
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (deadline.Passed()) {
      return absl::DeadlineExceededError(absl::StrCat("process ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

int ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  absl::StatusOr<int> code = Wait(grace);
  if (!code.ok()) {
    Signal(SIGKILL);
    code = Wait(absl::Seconds(10));
  }
  return code.ok() ? *code : -1;
}

}  // namespace ringsync
