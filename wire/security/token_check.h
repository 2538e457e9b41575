// TokenCheck: the server side of the cluster token. Every call to a port that requires
// the token passes through it before any service sees the call: gRPC runs it as the
// port's AuthMetadataProcessor, so the check covers every service on the port (health
// included) and a refused call never reaches a handler. The token is consumed from the
// metadata: no handler, interceptor or log line sees it.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"

namespace ringsync {

// How a server reports a refused caller: `reason` is a fixed snake_case label, `detail`
// may quote outside input (the reporter escapes and cuts it). Null: refusals go unreported.
using RefusalReporter = std::function<void(absl::string_view reason, absl::string_view detail)>;

class TokenCheck {
 public:
  // REQUIRES: !token.empty().
  TokenCheck(std::string token, RefusalReporter refusals);

  // OK when `authorization` (the metadata value; null when absent) carries the token;
  // otherwise UNAUTHENTICATED saying what was wrong, reported as a refusal. `caller`
  // describes the call for the report (method, certificate).
  absl::Status Check(const absl::string_view* authorization, absl::string_view caller) const;

 private:
  const std::string token_;
  const RefusalReporter refusals_;
};

// The check as gRPC's per-port processor (for TLS server credentials).
std::shared_ptr<grpc::AuthMetadataProcessor> TokenProcessor(std::shared_ptr<const TokenCheck> check);

// Plain TCP whose every call must carry the token. gRPC's C++ InsecureServerCredentials
// cannot take a processor, but its core credentials can (gRPC 1.51: the server auth
// filter runs on insecure ports too), so this binds the port through the core API.
std::shared_ptr<grpc::ServerCredentials> PlaintextWithToken(std::shared_ptr<const TokenCheck> check);

}  // namespace ringsync
