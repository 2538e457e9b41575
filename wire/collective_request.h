// The collective a ringsync.v1.Worker RPC asks for, read from its CollectiveRequest.
//
// Requests carry the spec in `spec`, the message ranks exchange on the ring. Requests of
// SDKs older than that carry its fields flat; until those fields go away (next release)
// a request without `spec` is read from them. Either way the same checks apply.
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective.h"
#include "ringsync/v1/worker.pb.h"

namespace ringsync {

// The longest timeout a request may ask for (timeout_ms).
inline constexpr absl::Duration kMaxRequestTimeout = absl::Hours(24);

// The validated spec (ValidateSpec) of a request that came by the RPC for `rpc_kind`;
// its sequence is 0 (the ring numbers collectives). InvalidArgument, starting with the
// field, for a bad spec or one whose kind is not the RPC's. A barrier needs no dtype.
absl::StatusOr<CollectiveSpec> SpecOfRequest(CollectiveKind rpc_kind,
                                             const v1::CollectiveRequest& request);

// Writes `spec` (its sequence left out) into a request.
void SetRequestSpec(const CollectiveSpec& spec, v1::CollectiveRequest* request);

}  // namespace ringsync
