#include "daemon/worker/client_gate.h"

#include <array>
#include <cstdint>

#include "absl/strings/escaping.h"
#include "daemon/transport/tcp/random_key.h"

namespace ringsync {
namespace {

// 32 bytes from the kernel's generator, as hex.
absl::StatusOr<std::string> NewToken() {
  std::array<std::byte, 32> secret{};
  if (absl::Status filled = FillFromKernelRandom(absl::MakeSpan(secret)); !filled.ok()) {
    return filled;
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(secret.data()), secret.size()));
}

}  // namespace

bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;  // every token has the same, public, length
  volatile uint8_t difference = 0;         // volatile: no early exit
  for (size_t i = 0; i < a.size(); ++i) {
    difference = difference | static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return difference == 0;
}

absl::StatusOr<std::string> ClientGate::Open(std::optional<PeerCredentials> local) {
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  AttachedClient client{*std::move(token), local};
  absl::MutexLock lock(&mu_);
  attached_ = client;
  return client.token;
}

void ClientGate::Close(absl::string_view token) {
  absl::MutexLock lock(&mu_);
  if (attached_.has_value() && SameSecret(attached_->token, token)) attached_.reset();
}

absl::StatusOr<AttachedClient> ClientGate::Check(absl::string_view presented) const {
  absl::MutexLock lock(&mu_);
  if (!attached_.has_value()) {
    return absl::PermissionDeniedError(
        "no training process is attached to this worker: call Attach first");
  }
  if (presented.empty()) {
    return absl::PermissionDeniedError(
        "the request carries no attach token: only the attached training process may ask "
        "for collectives (its SDK sends the token its Attach stream returned)");
  }
  if (!SameSecret(attached_->token, presented)) {
    return absl::PermissionDeniedError(
        "the request's attach token is not the attached training process's (a stale "
        "client, or another process on this host)");
  }
  return *attached_;
}

}  // namespace ringsync
