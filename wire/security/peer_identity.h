// Who the authenticated peer of a call is, from its TLS client certificate. A ringsync
// certificate names its holder in a URI subject alternative name, ringsync://ROLE/ID
// (deploy/make-certs.sh): ringsync://worker/w0 is worker w0. Host names in the
// certificate say where a service runs; only the URI says who it is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_context.h"

namespace ringsync {

inline constexpr char kWorkerIdentityPrefix[] = "ringsync://worker/";

// What the caller of a call proved about itself.
struct PeerIdentity {
  bool authenticated = false;  // a verified client certificate (mutual TLS)
  std::vector<std::string> uris;  // its URI subject alternative names

  // Whether the certificate names worker `worker_id`.
  bool IsWorker(absl::string_view worker_id) const;
  // "certificate ringsync://worker/w2" or "no client certificate", for messages.
  std::string Describe() const;
};

PeerIdentity IdentityOf(const grpc::AuthContext* context);

// OK when `claimed_worker_id` may be acted on for this caller: without mutual TLS anything
// (a cluster token proves membership, not identity); with it, only when the certificate
// names that worker. PermissionDenied otherwise, saying what each side says.
absl::Status CheckClaimedWorker(const PeerIdentity& peer, absl::string_view claimed_worker_id,
                                bool tls_required);

}  // namespace ringsync
