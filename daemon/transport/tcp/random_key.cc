#include "daemon/transport/tcp/random_key.h"

#include <sys/random.h>

#include <cerrno>

namespace ringsync {

absl::Status FillFromKernelRandom(absl::Span<std::byte> bytes) {
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace ringsync
