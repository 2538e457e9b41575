// The sockaddr_un of a unix socket path, for bind() and connect(): the worker's socket,
// its descriptor socket, and the SDK's side of the latter.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ringsync {

// InvalidArgument naming the path when it does not fit sun_path (with its terminator).
inline absl::StatusOr<sockaddr_un> UnixSocketAddress(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path ", path, " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace ringsync
