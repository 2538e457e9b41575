#include "daemon/worker/client_gate.h"

#include <sys/random.h>

#include <array>
#include <cstdint>

#include "absl/strings/escaping.h"

namespace ringsync {
namespace {

std::string NewToken() {
  std::array<char, 32> secret{};
  size_t filled = 0;
  while (filled < secret.size()) {
    // getrandom blocks only until the kernel's pool is initialised, once after boot.
    const ssize_t got = ::getrandom(secret.data() + filled, secret.size() - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
  }
  return absl::BytesToHexString(absl::string_view(secret.data(), secret.size()));
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

std::string ClientGate::Open(std::optional<PeerCredentials> local) {
  AttachedClient client{NewToken(), local};
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
