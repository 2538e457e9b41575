#include "daemon/worker/shm_sweep.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/worker/shared_tensor.h"

namespace ringsync {
namespace {

bool AllOf(absl::string_view s, int (*is)(int)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The pid in an SDK file name "ringsync-<pid>-<n>-<8 hex>"; nullopt for any other name.
std::optional<pid_t> OwnerPid(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, SharedTensor::kNamePrefix)) return std::nullopt;
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  if (parts.size() != 3 || !AllOf(parts[0], isdigit) || !AllOf(parts[1], isdigit) ||
      parts[2].size() != 8 || !AllOf(parts[2], isxdigit)) {
    return std::nullopt;
  }
  int pid = 0;
  if (!absl::SimpleAtoi(parts[0], &pid) || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

}  // namespace

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

std::vector<std::string> SweepDeadClientFiles(const std::string& directory, uid_t uid,
                                              const std::function<bool(pid_t)>& alive) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::optional<pid_t> pid = OwnerPid(entry.path().filename().string());
    if (!pid.has_value()) continue;
    struct stat info {};
    const std::string path = entry.path().string();
    if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != uid) {
      continue;
    }
    if (alive(*pid)) continue;
    if (::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  return removed;
}

}  // namespace ringsync
