// Sealed records: what keeps a data connection (data_connection.h) as private and
// tamper-proof as the mutual-TLS ring stream it belongs to.
//
// Under mutual TLS the receiver of a ring stream hands the sender, beside the one-time
// data key, a fresh 256-bit seal key (PeerAck.data_seal_key) — inside the stream's TLS, so
// no one else learns it. Every record on that stream's data connection is then sealed
// with AES-256-GCM under it: the record's 4-byte length prefix is the additional data,
// the nonce is the record's number on the connection (0, 1, 2, ...), and the 16-byte tag
// follows the ciphertext. A record that was altered, dropped, replayed, reordered or sent
// by anyone without the key fails to open, and the connection is then unusable. One key
// seals one connection in one direction only, so a number never repeats under a key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringsync {

inline constexpr size_t kRecordSealKeyBytes = 32;
inline constexpr size_t kRecordSealTagBytes = 16;
using RecordSealKey = std::array<std::byte, kRecordSealKeyBytes>;

// A key from the kernel's random source.
absl::StatusOr<RecordSealKey> NewRecordSealKey();
// The key as PeerAck carries it, and back; InvalidArgument unless exactly kRecordSealKeyBytes.
std::string RecordSealKeyBytes(const RecordSealKey& key);
absl::StatusOr<RecordSealKey> ParseRecordSealKey(absl::string_view bytes);

}  // namespace ringsync

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace ringsync {
namespace record_seal_internal {
struct CipherContextFree {
  void operator()(evp_cipher_ctx_st* context) const;
};
using CipherContext = std::unique_ptr<evp_cipher_ctx_st, CipherContextFree>;
}  // namespace record_seal_internal

// The sending side: seals a connection's records in the order they are sent.
// Thread-safety: one thread at a time.
class RecordSealer {
 public:
  static absl::StatusOr<std::unique_ptr<RecordSealer>> Create(const RecordSealKey& key);

  // Seals the next record — the concatenation of `pieces`, whose length prefix on the
  // wire is `prefix` — into `sealed`: its ciphertext, then the tag (resized to the
  // plaintext's size + kRecordSealTagBytes; its storage is reused from call to call).
  absl::Status Seal(absl::Span<const std::byte> prefix,
                    absl::Span<const absl::Span<const std::byte>> pieces,
                    std::vector<std::byte>& sealed);

 private:
  explicit RecordSealer(record_seal_internal::CipherContext context) : context_(std::move(context)) {}
  record_seal_internal::CipherContext context_;
  uint64_t next_record_ = 0;
};

// The receiving side: opens a connection's records in the order they arrive.
// Thread-safety: one thread at a time.
class RecordOpener {
 public:
  static absl::StatusOr<std::unique_ptr<RecordOpener>> Create(const RecordSealKey& key);

  // Opens the next record in place: `record` is what followed length prefix `prefix` on
  // the wire (ciphertext, then tag). Returns the plaintext's size (it now starts
  // `record`), or DataLoss when the record does not open — it was altered, is not the
  // next one, or was not sealed with this key; every later record then fails too.
  absl::StatusOr<size_t> Open(absl::Span<const std::byte> prefix, absl::Span<std::byte> record);

 private:
  explicit RecordOpener(record_seal_internal::CipherContext context) : context_(std::move(context)) {}
  record_seal_internal::CipherContext context_;
  uint64_t next_record_ = 0;
  bool failed_ = false;
};

}  // namespace ringsync
