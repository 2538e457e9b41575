// HandOverDescriptor: the SDK's side of the worker's descriptor socket
// (wire/descriptor_socket.h): passes a registered buffer's memfd to the worker under a
// fresh random nonce, which the RegisterBuffer call then names. Works from any pid
// namespace that reaches the socket.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringsync::internal {

// The nonce `fd` now waits under in the worker's descriptor socket at `socket_path`;
// Unavailable naming the path and the reason when the socket cannot be reached or the
// worker refuses it (it holds too many), DeadlineExceeded past `timeout`.
absl::StatusOr<std::string> HandOverDescriptor(const std::string& socket_path, int fd,
                                               absl::Duration timeout);

}  // namespace ringsync::internal
