#include "wire/security/peer_identity.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc_security_constants.h"

namespace ringsync {
namespace {

constexpr size_t kMaxShownIdBytes = 128;

}  // namespace

bool PeerIdentity::IsWorker(absl::string_view worker_id) const {
  const std::string wanted = absl::StrCat(kWorkerIdentityPrefix, worker_id);
  for (const std::string& uri : uris) {
    if (uri == wanted) return true;
  }
  return false;
}

std::string PeerIdentity::Describe() const {
  if (!authenticated) return "no client certificate";
  if (uris.empty()) return "a certificate without a ringsync:// URI name";
  return absl::StrCat("a certificate for ", absl::StrJoin(uris, ", "));
}

PeerIdentity IdentityOf(const grpc::AuthContext* context) {
  PeerIdentity identity;
  if (context == nullptr || !context->IsPeerAuthenticated()) return identity;
  identity.authenticated = true;
  for (const grpc::string_ref& uri : context->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    identity.uris.emplace_back(uri.data(), uri.size());
  }
  return identity;
}

absl::Status CheckClaimedWorker(const PeerIdentity& peer, absl::string_view claimed_worker_id,
                                bool tls_required) {
  if (!tls_required) return absl::OkStatus();
  if (peer.IsWorker(claimed_worker_id)) return absl::OkStatus();
  // The claim is outside input: cut and escaped before it reaches a message.
  const std::string shown = absl::CHexEscape(claimed_worker_id.substr(0, kMaxShownIdBytes));
  return absl::PermissionDeniedError(absl::StrCat(
      "the caller claims to be worker '", shown, "' but presented ", peer.Describe(),
      "; a worker's certificate must name it as URI:", kWorkerIdentityPrefix, shown,
      " (deploy/make-certs.sh DIR worker/", shown, ")"));
}

}  // namespace ringsync
