// Sealed records: what keeps a data connection (data_connection.h) as private and
// tamper-proof as the mutual-TLS ring stream it belongs to.
//
// Under mutual TLS the receiver of a ring stream hands the sender, beside the one-time
// data key, a fresh 256-bit seal key (PeerAck.data_seal_key) — inside the stream's TLS, so
// no one else learns it. Every record on that stream's data connection is then sealed
// with AES-256-GCM: the record's 4-byte length prefix is the additional data, the nonce
// is the record's number on the connection (0, 1, 2, ...), and the 16-byte tag follows
// the ciphertext. A record that was altered, dropped, replayed, reordered or sent by
// anyone without the key fails to open, and the connection is then unusable. One key
// seals one connection in one direction only, so a number never repeats under a key.
//
// A connection lives as long as its ring (days, terabytes), longer than one AES-GCM key
// should seal (TLS 1.3 stops at ~2^38 bytes): after every `rekey_bytes` on the wire under
// a key, both ends replace it with HMAC-SHA256(key, "ringsync record seal: next key"), in
// step and without a message, as TLS 1.3's key update derives the next traffic secret.
// The old key is forgotten, so a key taken from a live process opens no earlier record.
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
#include "daemon/transport/tcp/random_key.h"

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace ringsync {

inline constexpr size_t kRecordSealKeyBytes = 32;
inline constexpr size_t kRecordSealTagBytes = 16;
// 16 GiB: a 64th of TLS 1.3's bound for AES-GCM (RFC 8446 5.5: 2^24.5 records of 16 KiB).
inline constexpr uint64_t kRecordSealRekeyBytes = uint64_t{1} << 34;
using RecordSealKey = RandomKey<kRecordSealKeyBytes>;

// A key from the kernel's random source.
inline absl::StatusOr<RecordSealKey> NewRecordSealKey() { return NewRandomKey<kRecordSealKeyBytes>(); }
// The key as PeerAck carries it, and back; InvalidArgument unless exactly kRecordSealKeyBytes.
inline std::string RecordSealKeyBytes(const RecordSealKey& key) { return KeyBytes(key); }
inline absl::StatusOr<RecordSealKey> ParseRecordSealKey(absl::string_view bytes) {
  return ParseKey<kRecordSealKeyBytes>(bytes, "a data connection seal key");
}

namespace record_seal_internal {

struct CipherContextFree {
  void operator()(evp_cipher_ctx_st* context) const;
};
using CipherContext = std::unique_ptr<evp_cipher_ctx_st, CipherContextFree>;

// What both ends of a connection advance in step: the key, its cipher context, the next
// record's number and the bytes sealed under the key so far.
class SealState {
 public:
  static absl::StatusOr<SealState> Start(const RecordSealKey& key, bool sealing,
                                         uint64_t rekey_bytes);

  evp_cipher_ctx_st* context() const { return context_.get(); }
  uint64_t record() const { return record_; }
  // Starts record record(): its nonce, then `prefix` as the additional data. False when
  // OpenSSL refused.
  bool Begin(absl::Span<const std::byte> prefix);
  // The record numbered record() took `wire_bytes` (ciphertext and tag): on to the next
  // number, and to the next key once rekey_bytes went under this one.
  absl::Status Advance(uint64_t wire_bytes);

 private:
  SealState(const RecordSealKey& key, CipherContext context, bool sealing, uint64_t rekey_bytes)
      : key_(key), context_(std::move(context)), sealing_(sealing), rekey_bytes_(rekey_bytes) {}

  RecordSealKey key_;
  CipherContext context_;
  bool sealing_;
  uint64_t rekey_bytes_;
  uint64_t record_ = 0;
  uint64_t bytes_under_key_ = 0;
};

}  // namespace record_seal_internal

// The sending side: seals a connection's records in the order they are sent.
// Thread-safety: one thread at a time.
class RecordSealer {
 public:
  static absl::StatusOr<std::unique_ptr<RecordSealer>> Create(
      const RecordSealKey& key, uint64_t rekey_bytes = kRecordSealRekeyBytes);

  // Seals the next record — the concatenation of `pieces`, whose length prefix on the
  // wire is `prefix` — into `sealed`: its ciphertext, then the tag (resized to the
  // plaintext's size + kRecordSealTagBytes; its storage is reused from call to call).
  absl::Status Seal(absl::Span<const std::byte> prefix,
                    absl::Span<const absl::Span<const std::byte>> pieces,
                    std::vector<std::byte>& sealed);

 private:
  explicit RecordSealer(record_seal_internal::SealState state) : state_(std::move(state)) {}
  record_seal_internal::SealState state_;
};

// The receiving side: opens a connection's records in the order they arrive.
// Thread-safety: one thread at a time.
class RecordOpener {
 public:
  static absl::StatusOr<std::unique_ptr<RecordOpener>> Create(
      const RecordSealKey& key, uint64_t rekey_bytes = kRecordSealRekeyBytes);

  // Opens the next record in place: `record` is what followed length prefix `prefix` on
  // the wire (ciphertext, then tag). Returns the plaintext's size (it now starts
  // `record`), or DataLoss when the record does not open — it was altered, is not the
  // next one, or was not sealed with this key; every later record then fails too.
  absl::StatusOr<size_t> Open(absl::Span<const std::byte> prefix, absl::Span<std::byte> record);

 private:
  explicit RecordOpener(record_seal_internal::SealState state) : state_(std::move(state)) {}
  record_seal_internal::SealState state_;
  bool failed_ = false;
};

}  // namespace ringsync
