// The cluster token: a shared secret, read from a file, that proves a caller belongs to
// the cluster when there is no PKI (or in addition to mutual TLS). Clients send it on
// every call as "authorization: Bearer TOKEN"; servers compare it in constant time.
// It proves membership, not identity: any holder may claim any worker id.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringsync {

// The metadata key and HTTP header that carry the token (gRPC keys are lower case).
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// Reads the token from `path`: its content less surrounding white space. InvalidArgument
// naming `flag` when the file cannot be read, is empty or holds more than one line.
absl::StatusOr<std::string> ReadClusterToken(const std::string& path, absl::string_view flag);

// Whether `authorization` (a header value) is "Bearer TOKEN" for `token`, compared in
// time that depends only on the lengths, not on where the first difference is.
// REQUIRES: !token.empty().
bool BearerMatches(absl::string_view authorization, absl::string_view token);

}  // namespace ringsync
