// How the worker's gRPC statuses reach the SDK's user: same code, same message (the
// worker's message names rank, worker, generation and collective), plus what to try
// where the code alone suggests it.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/outcome.h"
#include "client/src/worker_target.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace ringsync::internal {

// `reported_by_worker`: the worker itself returned the status (worker.proto's
// "ringsync-status-origin" trailer), so an UNAVAILABLE is about the ring, not about the
// channel to the worker, and gets no "lost the worker" hint.
absl::Status FromWorkerStatus(const grpc::Status& status, const WorkerTarget& target,
                              bool reported_by_worker = false);

// A finished call's trailing metadata: the RPC's, or what a call channel answer carries
// in its place (call_channel.h).
using Trailers = absl::flat_hash_map<std::string, std::string>;
Trailers TrailersOf(const grpc::ClientContext& context);

// The outcome mark (core/outcome.h) the worker put in the call's trailing metadata;
// kNone when there is none or its name is unknown.
OutcomeMark OutcomeMarkFromWorker(const Trailers& trailers);

// The ring membership a membership-changed failure names (core/outcome.h's
// kMembershipMetadataKey trailer); nullopt when there is none or it does not parse.
std::optional<uint64_t> MembershipFromWorker(const Trailers& trailers);

// The outcome mark of a finished collective call: the worker's own when the worker
// reported the status; kInDoubt for a failure the worker did not report (the channel to
// it broke, the worker died, the call was cancelled here) with a code the call may have
// reached the worker with, since the worker may then have completed the collective with
// the ring before its answer was lost: another rank may have returned OK.
OutcomeMark OutcomeMarkOfCall(const grpc::Status& status, const Trailers& trailers);

// Whether the call's trailing metadata marks its status as the worker's own.
bool ReportedByWorker(const Trailers& trailers);
inline bool ReportedByWorker(const grpc::ClientContext& context) {
  return ReportedByWorker(TrailersOf(context));
}

}  // namespace ringsync::internal
