#include "daemon/worker/unix_socket_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/logging/string_view_formatter.h"
#include "grpcpp/server_posix.h"
#include "spdlog/spdlog.h"
#include "wire/unix_socket_address.h"

namespace ringsync {

absl::StatusOr<std::unique_ptr<UnixSocketListener>> UnixSocketListener::Listen(
    const std::string& path) {
  absl::StatusOr<sockaddr_un> address = UnixSocketAddress(path);
  if (!address.ok()) return address.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix socket ", path, ": ", std::strerror(error)));
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<UnixSocketListener>(new UnixSocketListener(fd, wake));
}

UnixSocketListener::~UnixSocketListener() {
  Stop();
  ::close(wake_fd_);
}

void UnixSocketListener::Serve(grpc::Server& server, LocalPeers& peers) {
  thread_ = std::thread([this, &server, &peers] { AcceptLoop(server, peers); });
}

void UnixSocketListener::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void UnixSocketListener::AcceptLoop(grpc::Server& server, LocalPeers& peers) {
  pollfd waits[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    if (::poll(waits, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("unix socket: poll: {}", std::strerror(errno));
      return;
    }
    if (waits[1].revents != 0) return;
    if (waits[0].revents == 0) continue;
    // Non-blocking, as gRPC's own listener makes the connections it accepts.
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        spdlog::warn("unix socket: accept: {}", std::strerror(errno));
        if (errno == EMFILE || errno == ENFILE) ::poll(nullptr, 0, 100);  // let some close
      }
      continue;
    }
    absl::StatusOr<PeerCredentials> peer = PeerCredentialsOf(fd);
    if (!peer.ok()) {
      spdlog::warn("unix socket: dropping a connection: {}", peer.status().message());
      ::close(fd);
      continue;
    }
    // Recorded before gRPC reads a byte from it, so no call on it goes unattributed.
    peers.Add(fd, *peer);
    grpc::AddInsecureChannelFromFd(&server, fd);
  }
}

}  // namespace ringsync
