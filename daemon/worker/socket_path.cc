#include "daemon/worker/socket_path.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "wire/unix_socket_address.h"
#include "absl/strings/str_format.h"

namespace ringsync {
namespace {

absl::Status Refused(absl::string_view path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve the training process on unix socket ", path, ": ", why));
}

// Whether a worker answers on the socket at `path`.
bool SomeoneListens(const std::string& path) {
  const absl::StatusOr<sockaddr_un> address = UnixSocketAddress(path);
  if (!address.ok()) return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool connected =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) == 0;
  ::close(fd);
  return connected;
}

absl::Status CheckDirectory(const std::string& dir, bool private_dir) {
  if (private_dir && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Refused(dir, absl::StrCat("cannot create its directory: ", std::strerror(errno)));
  }
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0) {
    return Refused(dir, absl::StrCat("its directory: ", std::strerror(errno)));
  }
  const uid_t me = ::getuid();
  if (!S_ISDIR(info.st_mode)) {
    return Refused(dir, "its directory is not a directory (a symbolic link?)");
  }
  if (private_dir && (info.st_uid != me || (info.st_mode & 077) != 0)) {
    return Refused(dir, absl::StrFormat(
        "its directory belongs to uid %d with mode %04o, but must be this worker's (uid %d) "
        "with mode 0700; another user may have created it to squat the socket: remove it, "
        "or pass --socket=PATH in a directory of yours",
        info.st_uid, info.st_mode & 07777, me));
  }
  if (info.st_uid != me && info.st_uid != 0) {
    return Refused(dir, absl::StrFormat(
        "its directory belongs to uid %d, not to this worker's uid %d or root; choose a "
        "--socket in a directory of yours",
        info.st_uid, me));
  }
  if ((info.st_mode & S_IWOTH) != 0 && (info.st_mode & S_ISVTX) == 0) {
    return Refused(dir, "its directory is writable by every user (and not sticky), so anyone "
                        "could replace the socket; choose a --socket in a private directory");
  }
  return absl::OkStatus();
}

}  // namespace

std::string DefaultSocketPath(absl::string_view worker_id) {
  return absl::StrCat("/tmp/ringsync-", ::getuid(), "/", worker_id, ".sock");
}

absl::Status PrepareSocketPath(const std::string& path, bool private_dir) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (absl::Status s = CheckDirectory(dir.empty() ? "." : dir, private_dir); !s.ok()) return s;
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return Refused(path, std::strerror(errno));
  }
  if (info.st_uid != ::getuid()) {
    return Refused(path, absl::StrFormat(
        "it exists and belongs to uid %d, not to this worker's uid %d: another user may be "
        "squatting it; remove it or choose another --socket",
        info.st_uid, ::getuid()));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return Refused(path, "it exists and is not a socket; remove it or choose another --socket");
  }
  if (SomeoneListens(path)) {
    return Refused(path, "another process is serving on it (a second worker with the same "
                         "--worker_id or --socket?)");
  }
  ::unlink(path.c_str());  // a socket left behind by a worker that was killed
  return absl::OkStatus();
}

}  // namespace ringsync
