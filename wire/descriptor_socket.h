// The worker's descriptor socket: where a training process hands over the memfd of a
// buffer it registers (SCM_RIGHTS), so that registration needs no pid the worker can see.
// The worker's side is daemon/worker/descriptor_inbox.h (protocol there), the SDK's
// client/src/descriptor_handover.h.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringsync {

// Bytes of the nonce a descriptor is handed over under (RegisterBufferRequest's
// descriptor_nonce).
inline constexpr size_t kDescriptorNonceBytes = 16;

// The descriptor socket beside a worker socket at `worker_socket`.
inline std::string DescriptorSocketPath(absl::string_view worker_socket) {
  return absl::StrCat(worker_socket, ".fds");
}

}  // namespace ringsync
