#include "daemon/transport/tcp/data_key.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<DataKey> NewDataKey() {
  DataKey key;
  if (absl::Status filled = FillFromKernelRandom(absl::MakeSpan(key)); !filled.ok()) return filled;
  return key;
}

std::string DataKeyBytes(const DataKey& key) {
  return std::string(reinterpret_cast<const char*>(key.data()), key.size());
}

absl::StatusOr<DataKey> ParseDataKey(absl::string_view bytes) {
  if (bytes.size() != kDataKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a data connection key of ", bytes.size(), " bytes (", kDataKeyBytes, " expected)"));
  }
  DataKey key;
  std::memcpy(key.data(), bytes.data(), key.size());
  return key;
}

std::array<std::byte, kDataHandshakeBytes> DataHandshake(const DataKey& key) {
  std::array<std::byte, kDataHandshakeBytes> handshake;
  std::memcpy(handshake.data(), kDataHandshakeMagic.data(), kDataHandshakeMagic.size());
  std::memcpy(handshake.data() + kDataHandshakeMagic.size(), key.data(), key.size());
  return handshake;
}

}  // namespace ringsync
