// The one-time key that ties a TCP data connection to the authenticated gRPC ring stream
// it belongs to, and the handshake that presents it.
//
// The receiver of a ring stream hands a fresh random key to the stream's sender inside
// its acceptance (PeerAck.data_key), which travels over the stream's authenticated
// channel (cluster token or mutual TLS). The sender opens a TCP connection to the
// receiver's data port and writes the handshake first: kDataHandshakeMagic, then the key.
// The receiver answers kDataAccepted and from then on reads records; a connection with
// any other first bytes is closed unanswered. A key is good for one connection, so a key
// seen on the wire is worth nothing afterwards.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/transport/tcp/random_key.h"

namespace ringsync {

inline constexpr size_t kDataKeyBytes = 16;
using DataKey = RandomKey<kDataKeyBytes>;

// "ringsync data connection, version 1".
inline constexpr absl::string_view kDataHandshakeMagic = "RSDATA1\n";
inline constexpr size_t kDataHandshakeBytes = kDataHandshakeMagic.size() + kDataKeyBytes;
inline constexpr std::byte kDataAccepted{0x4b};  // 'K'

// A key from the kernel's random source.
inline absl::StatusOr<DataKey> NewDataKey() { return NewRandomKey<kDataKeyBytes>(); }
// The key as PeerAck carries it, and back; InvalidArgument unless exactly kDataKeyBytes.
inline std::string DataKeyBytes(const DataKey& key) { return KeyBytes(key); }
inline absl::StatusOr<DataKey> ParseDataKey(absl::string_view bytes) {
  return ParseKey<kDataKeyBytes>(bytes, "a data connection key");
}
// What a sender writes first.
std::array<std::byte, kDataHandshakeBytes> DataHandshake(const DataKey& key);

}  // namespace ringsync
