#include "daemon/process/port_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, port_file, "",
          "If set, after the listening port is bound write its HOST:PORT and a newline to "
          "this file (atomically: temporary file, then rename), so scripts and tests can "
          "find a port chosen with port 0.");

namespace ringsync {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

}  // namespace

absl::Status WritePortFile(const std::string& path, const std::string& address) {
  if (path.empty()) return absl::InvalidArgumentError("--port_file is empty");
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  const std::string line = absl::StrCat(address, "\n");
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write port file: open ", temp, ": ",
                                               ErrnoText(errno),
                                               "; check that --port_file's directory exists "
                                               "and is writable"));
  }
  size_t written = 0;
  int error = 0;
  while (written < line.size()) {
    const ssize_t n = write(fd, line.data() + written, line.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (error == 0 && fsync(fd) != 0) error = errno;
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    unlink(temp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write port file ", path, ": ", ErrnoText(error)));
  }
  return absl::OkStatus();
}

}  // namespace ringsync
