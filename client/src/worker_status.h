// How the worker's gRPC statuses reach the SDK's user: same code, same message (the
// worker's message names rank, worker, generation and collective), plus what to try
// where the code alone suggests it.
//
// Thread-safety: a pure function.
#pragma once

#include "absl/status/status.h"
#include "client/src/worker_target.h"
#include "grpcpp/support/status.h"

namespace ringsync::internal {

absl::Status FromWorkerStatus(const grpc::Status& status, const WorkerTarget& target);

}  // namespace ringsync::internal
