#include "daemon/http/deadline_stream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>


namespace ringsync {

DeadlineStream::DeadlineStream(int sock, SteadyDeadline read_deadline,
                               absl::Duration write_timeout)
    : sock_(sock), read_deadline_(read_deadline), write_timeout_(write_timeout) {}

bool DeadlineStream::WaitFor(short events, SteadyDeadline deadline) const {
  for (;;) {
    const absl::Duration left = deadline.Left();
    if (left <= absl::ZeroDuration()) return false;
    pollfd poll_fd{sock_, events, 0};
    const int64_t left_ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
    // poll takes int milliseconds: a later deadline is waited for a minute at a time.
    const int timeout_ms = static_cast<int>(std::min<int64_t>(left_ms, 60'000));
    const int ready = ::poll(&poll_fd, 1, timeout_ms);
    // Ready, or closed / failed: the recv or send that follows says which.
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;
  }
}

bool DeadlineStream::is_readable() const {
  return buffered_begin_ < buffered_end_ || WaitFor(POLLIN, read_deadline_);
}

bool DeadlineStream::is_writable() const {
  return WaitFor(POLLOUT, std::min(write_deadline_, SteadyDeadline(write_timeout_)));
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (buffered_begin_ == buffered_end_) {
    if (!WaitFor(POLLIN, read_deadline_)) {
      read_timed_out_ = true;
      return -1;
    }
    ssize_t received;
    do {
      received = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
    } while (received < 0 && errno == EINTR);
    if (received <= 0) return received;
    buffered_begin_ = 0;
    buffered_end_ = static_cast<size_t>(received);
  }
  const size_t n = std::min(size, buffered_end_ - buffered_begin_);
  std::memcpy(ptr, buffer_.data() + buffered_begin_, n);
  buffered_begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (write_deadline_ == SteadyDeadline::Never()) write_deadline_ = SteadyDeadline(write_timeout_);
  if (!WaitFor(POLLOUT, write_deadline_)) return -1;
  ssize_t sent;
  do {
    sent = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent;
}

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(sock_, /*local=*/false, ip, port);
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(sock_, /*local=*/true, ip, port);
}

void SocketAddress(int sock, bool local, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((local ? ::getsockname(sock, raw, &length) : ::getpeername(sock, raw, &length)) != 0) return;
  char host[NI_MAXHOST] = {};
  char service[NI_MAXSERV] = {};
  if (::getnameinfo(raw, length, host, sizeof(host), service, sizeof(service),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(service);
}

}  // namespace ringsync
