#include "daemon/transport/tcp/data_key.h"

#include <cstring>

namespace ringsync {

std::array<std::byte, kDataHandshakeBytes> DataHandshake(const DataKey& key) {
  std::array<std::byte, kDataHandshakeBytes> handshake;
  std::memcpy(handshake.data(), kDataHandshakeMagic.data(), kDataHandshakeMagic.size());
  std::memcpy(handshake.data() + kDataHandshakeMagic.size(), key.data(), key.size());
  return handshake;
}

}  // namespace ringsync
