#include "daemon/worker/local_peers.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringsync {

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd) {
  struct ucred credentials {};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return absl::InternalError(absl::StrCat("SO_PEERCRED: ", std::strerror(errno)));
  }
  return PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
}

void LocalPeers::Add(int fd, const PeerCredentials& peer) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = peer;
}

std::optional<PeerCredentials> LocalPeers::Find(absl::string_view grpc_peer) const {
  // gRPC names a connection added with AddInsecureChannelFromFd "fd:<N>".
  int fd = -1;
  if (!absl::ConsumePrefix(&grpc_peer, "fd:") || !absl::SimpleAtoi(grpc_peer, &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ringsync
