#include "daemon/transport/tcp/record_seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace record_seal_internal {

void CipherContextFree::operator()(evp_cipher_ctx_st* context) const { EVP_CIPHER_CTX_free(context); }

}  // namespace record_seal_internal
namespace {

using record_seal_internal::CipherContext;
using record_seal_internal::SealState;

constexpr int kNonceBytes = 12;
constexpr absl::string_view kNextKeyLabel = "ringsync record seal: next key";

// A context for AES-256-GCM with `key`, for sealing or for opening.
absl::StatusOr<CipherContext> NewContext(const RecordSealKey& key, bool sealing) {
  CipherContext context(EVP_CIPHER_CTX_new());
  if (context == nullptr) return absl::ResourceExhaustedError("EVP_CIPHER_CTX_new failed");
  if (EVP_CipherInit_ex(context.get(), EVP_aes_256_gcm(), nullptr,
                        reinterpret_cast<const unsigned char*>(key.data()), nullptr,
                        sealing ? 1 : 0) != 1) {
    return absl::InternalError("setting up AES-256-GCM failed");
  }
  return context;
}

// Record `number`'s nonce: the number, little-endian, in the first 8 of 12 bytes.
std::array<unsigned char, kNonceBytes> NonceOf(uint64_t number) {
  std::array<unsigned char, kNonceBytes> nonce{};
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<unsigned char>(number >> (8 * i));
  return nonce;
}

// OpenSSL takes int lengths: longer spans go in pieces.
constexpr size_t kMaxUpdateBytes = size_t{1} << 30;

}  // namespace

namespace record_seal_internal {

absl::StatusOr<SealState> SealState::Start(const RecordSealKey& key, bool sealing,
                                           uint64_t rekey_bytes) {
  absl::StatusOr<CipherContext> context = NewContext(key, sealing);
  if (!context.ok()) return context.status();
  return SealState(key, *std::move(context), sealing, rekey_bytes);
}

bool SealState::Begin(absl::Span<const std::byte> prefix) {
  const auto nonce = NonceOf(record_);
  int written = 0;
  return EVP_CipherInit_ex(context_.get(), nullptr, nullptr, nullptr, nonce.data(), -1) == 1 &&
         EVP_CipherUpdate(context_.get(), nullptr, &written,
                          reinterpret_cast<const unsigned char*>(prefix.data()),
                          static_cast<int>(prefix.size())) == 1;
}

absl::Status SealState::Advance(uint64_t wire_bytes) {
  ++record_;
  bytes_under_key_ += wire_bytes;
  if (bytes_under_key_ < rekey_bytes_) return absl::OkStatus();
  RecordSealKey next;
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
           reinterpret_cast<const unsigned char*>(kNextKeyLabel.data()), kNextKeyLabel.size(),
           reinterpret_cast<unsigned char*>(next.data()), &size) == nullptr ||
      size != next.size()) {
    return absl::InternalError("deriving the data connection's next seal key failed");
  }
  absl::StatusOr<CipherContext> context = NewContext(next, sealing_);
  OPENSSL_cleanse(key_.data(), key_.size());
  if (context.ok()) key_ = next;
  OPENSSL_cleanse(next.data(), next.size());  // on failure too: no key left on the stack
  if (!context.ok()) return context.status();
  context_ = *std::move(context);
  bytes_under_key_ = 0;
  return absl::OkStatus();
}

}  // namespace record_seal_internal

absl::StatusOr<std::unique_ptr<RecordSealer>> RecordSealer::Create(const RecordSealKey& key,
                                                                   uint64_t rekey_bytes) {
  absl::StatusOr<SealState> state = SealState::Start(key, /*sealing=*/true, rekey_bytes);
  if (!state.ok()) return state.status();
  return std::unique_ptr<RecordSealer>(new RecordSealer(*std::move(state)));
}

absl::Status RecordSealer::Seal(absl::Span<const std::byte> prefix,
                                absl::Span<const absl::Span<const std::byte>> pieces,
                                std::vector<std::byte>& sealed) {
  size_t plain = 0;
  for (absl::Span<const std::byte> piece : pieces) plain += piece.size();
  sealed.resize(plain + kRecordSealTagBytes);
  EVP_CIPHER_CTX* c = state_.context();
  if (!state_.Begin(prefix)) return absl::InternalError("sealing a data connection record failed");
  int written = 0;
  auto* out = reinterpret_cast<unsigned char*>(sealed.data());
  for (absl::Span<const std::byte> piece : pieces) {
    for (size_t at = 0; at < piece.size(); at += kMaxUpdateBytes) {
      const int bytes = static_cast<int>(std::min(kMaxUpdateBytes, piece.size() - at));
      if (EVP_EncryptUpdate(c, out, &written,
                            reinterpret_cast<const unsigned char*>(piece.data() + at), bytes) != 1) {
        return absl::InternalError("sealing a data connection record failed");
      }
      out += written;
    }
  }
  if (EVP_EncryptFinal_ex(c, out, &written) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kRecordSealTagBytes,
                          sealed.data() + plain) != 1) {
    return absl::InternalError("sealing a data connection record failed");
  }
  return state_.Advance(sealed.size());
}

absl::StatusOr<std::unique_ptr<RecordOpener>> RecordOpener::Create(const RecordSealKey& key,
                                                                   uint64_t rekey_bytes) {
  absl::StatusOr<SealState> state = SealState::Start(key, /*sealing=*/false, rekey_bytes);
  if (!state.ok()) return state.status();
  return std::unique_ptr<RecordOpener>(new RecordOpener(*std::move(state)));
}

absl::StatusOr<size_t> RecordOpener::Open(absl::Span<const std::byte> prefix,
                                          absl::Span<std::byte> record) {
  const uint64_t number = state_.record();
  if (failed_) return absl::DataLossError("an earlier sealed record on the data connection failed to open");
  auto fail = [&](absl::string_view why) {
    failed_ = true;
    return absl::DataLossError(absl::StrCat("sealed record ", number, " on the data connection ", why,
                                            " (altered on the way, or not from the stream's "
                                            "sender)"));
  };
  if (record.size() < kRecordSealTagBytes) return fail("is shorter than its tag");
  const size_t plain = record.size() - kRecordSealTagBytes;
  EVP_CIPHER_CTX* c = state_.context();
  if (!state_.Begin(prefix)) return fail("could not be opened");
  int written = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(record.data());
  for (size_t at = 0; at < plain; at += kMaxUpdateBytes) {
    const int n = static_cast<int>(std::min(kMaxUpdateBytes, plain - at));
    if (EVP_DecryptUpdate(c, bytes + at, &written, bytes + at, n) != 1) return fail("could not be opened");
  }
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kRecordSealTagBytes, bytes + plain) != 1 ||
      EVP_DecryptFinal_ex(c, bytes + plain, &written) != 1) {
    return fail("failed authentication");
  }
  if (absl::Status next = state_.Advance(record.size()); !next.ok()) {
    failed_ = true;
    return next;
  }
  return plain;
}

}  // namespace ringsync
