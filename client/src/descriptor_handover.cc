#include "client/src/descriptor_handover.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "daemon/process/unique_fd.h"
#include "wire/descriptor_socket.h"
#include "wire/unix_socket_address.h"

namespace ringsync::internal {
namespace {

absl::Status Failed(const std::string& path, absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("cannot hand a buffer's descriptor to the worker at ",
                                             path, ": ", what));
}

}  // namespace

absl::StatusOr<std::string> HandOverDescriptor(const std::string& socket_path, int fd,
                                               absl::Duration timeout) {
  const absl::StatusOr<sockaddr_un> address = UnixSocketAddress(socket_path);
  if (!address.ok()) return Failed(socket_path, "path too long");
  // Closed however the hand-over ends.
  const UniqueFd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!connection.valid()) return Failed(socket_path, std::strerror(errno));
  const timeval limit = absl::ToTimeval(timeout);
  ::setsockopt(connection.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  ::setsockopt(connection.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  if (::connect(connection.get(), reinterpret_cast<const sockaddr*>(&*address),
                sizeof(*address)) != 0) {
    return Failed(socket_path, std::strerror(errno));
  }

  std::string nonce(kDescriptorNonceBytes, '\0');
  absl::BitGen random;
  for (char& c : nonce) c = static_cast<char>(absl::Uniform<uint8_t>(random));
  iovec data{nonce.data(), nonce.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* attached = CMSG_FIRSTHDR(&message);
  attached->cmsg_level = SOL_SOCKET;
  attached->cmsg_type = SCM_RIGHTS;
  attached->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(attached), &fd, sizeof(int));
  if (::sendmsg(connection.get(), &message, MSG_NOSIGNAL) != static_cast<ssize_t>(nonce.size())) {
    return Failed(socket_path, std::strerror(errno));
  }
  char answer = 0;
  const ssize_t got = ::recv(connection.get(), &answer, 1, 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the worker's descriptor socket ", socket_path, " did not answer within ",
        absl::FormatDuration(timeout)));
  }
  if (got != 1 || answer != 'Y') {
    return Failed(socket_path, "the worker refused it (it holds too many not yet registered)");
  }
  return nonce;
}

}  // namespace ringsync::internal
