// The socket plumbing of data connections: listening, connecting with a deadline, and
// reading addresses as gRPC names them.
#pragma once

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/sync/wait_limit.h"
#include "daemon/process/unique_fd.h"

namespace ringsync {

// A non-blocking listening TCP socket on `host` (a numeric address or a name; the first
// address it resolves to that binds) and `port` (0: the kernel chooses).
absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port);
// The port a socket is bound to.
absl::StatusOr<int> LocalPort(int fd);
// "198.18.0.3:40112", "[::1]:7401".
std::string DescribeAddress(const sockaddr_storage& address);
// "198.18.0.3", "::1": the address without its port.
std::string DescribeHost(const sockaddr_storage& address);

// The address of a gRPC peer string ("ipv4:198.18.0.3:7401", "ipv6:[::1]:7401", the
// brackets possibly %-escaped) with its port replaced by `port`. InvalidArgument for any
// other kind of peer (a unix socket).
absl::StatusOr<sockaddr_storage> AddressOfGrpcPeer(absl::string_view peer, int port);

// A blocking TCP connection to `address` (TCP_NODELAY set), made within `limit`.
absl::StatusOr<UniqueFd> ConnectTcp(const sockaddr_storage& address, const WaitLimit& limit);

}  // namespace ringsync
