#include "daemon/transport/tcp/socket_address.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace ringsync {
namespace {

std::string Errno(absl::string_view what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// How long one poll of a connect in progress sleeps before the limit is looked at again.
constexpr int kConnectPollMillis = 50;

}  // namespace

absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int failed = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                                       &hints, &found);
      failed != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", host, ": ", ::gai_strerror(failed)));
  }
  std::string why = "no address";
  UniqueFd listening;
  for (addrinfo* a = found; a != nullptr && !listening.valid(); a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      why = Errno("socket");
      continue;
    }
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      why = Errno("bind");
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      why = Errno("listen");
      continue;
    }
    listening = std::move(fd);
  }
  ::freeaddrinfo(found);
  if (!listening.valid()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", why));
  }
  return listening;
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage bound{};
  socklen_t bytes = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bytes) != 0) {
    return absl::InternalError(Errno("getsockname"));
  }
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port);
  return absl::InternalError("a listening socket that is not TCP over IP");
}

std::string DescribeHost(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
                sizeof(text));
  }
  return text;
}

std::string DescribeAddress(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return absl::StrCat(DescribeHost(address), ":",
                        ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port));
  }
  if (address.ss_family == AF_INET6) {
    return absl::StrCat("[", DescribeHost(address), "]:",
                        ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port));
  }
  return "an address that is not IP";
}

absl::StatusOr<sockaddr_storage> AddressOfGrpcPeer(absl::string_view peer, int port) {
  const std::string unescaped = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}, {"%25", "%"}});
  absl::string_view rest = unescaped;
  sockaddr_storage address{};
  auto refuse = [&] {
    return absl::InvalidArgumentError(absl::StrCat("not an IP peer address: '", peer.substr(0, 96), "'"));
  };
  if (absl::ConsumePrefix(&rest, "ipv4:")) {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) return refuse();
    const std::string ip(rest.substr(0, colon));
    auto& v4 = reinterpret_cast<sockaddr_in&>(address);
    if (::inet_pton(AF_INET, ip.c_str(), &v4.sin_addr) != 1) return refuse();
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    return address;
  }
  if (absl::ConsumePrefix(&rest, "ipv6:[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return refuse();
    std::string ip(rest.substr(0, close));
    uint32_t scope = 0;
    if (const size_t zone = ip.find('%'); zone != std::string::npos) {
      scope = ::if_nametoindex(ip.substr(zone + 1).c_str());
      ip.resize(zone);
    }
    auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
    if (::inet_pton(AF_INET6, ip.c_str(), &v6.sin6_addr) != 1) return refuse();
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
    v6.sin6_scope_id = scope;
    return address;
  }
  return refuse();
}

absl::StatusOr<UniqueFd> ConnectTcp(const sockaddr_storage& address, const WaitLimit& limit) {
  const socklen_t bytes = address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  UniqueFd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(Errno("socket"));
  const std::string to = DescribeAddress(address);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), bytes) != 0) {
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat("connecting to ", to, ": ", std::strerror(errno)));
    }
    while (true) {
      pollfd p{fd.get(), POLLOUT, 0};
      const int ready = ::poll(&p, 1, kConnectPollMillis);
      if (ready > 0) break;
      if (limit.IsCancelled()) return absl::CancelledError(absl::StrCat("connecting to ", to));
      if (limit.deadline.Passed()) {
        return absl::DeadlineExceededError(absl::StrCat("connecting to ", to, ": no answer in time"));
      }
    }
    int error = 0;
    socklen_t error_bytes = sizeof(error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_bytes);
    if (error != 0) {
      return absl::UnavailableError(absl::StrCat("connecting to ", to, ": ", std::strerror(error)));
    }
  }
  const int on = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0) {
    return absl::InternalError(Errno("fcntl"));
  }
  return fd;
}

}  // namespace ringsync
