// The CollectiveJob a ringsync.v1.CollectiveRequest asks for: its spec (wire/
// collective_request.h), deadline, client sequence and data — inline bytes copied out of
// the request, or the client's shared-memory region mapped. Every field from the client
// is checked here, before anything reaches the executor.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective.h"
#include "daemon/worker/collective_job.h"
#include "daemon/worker/local_peers.h"
#include "wire/collective_request.h"
#include "ringsync/v1/worker.pb.h"

namespace ringsync {

struct JobRequestLimits {
  std::string shm_dir = "/dev/shm";  // where shared tensors may live
  absl::Duration default_timeout = absl::Seconds(60);  // for timeout_ms 0
  absl::Duration max_timeout = kMaxRequestTimeout;
  // The attached client on the unix socket, whose files alone it may name as shared
  // tensors (shared_tensor.h); nullopt refuses shared tensors (a client over TCP, whose
  // files the worker cannot attribute: its tensors travel inline).
  std::optional<PeerCredentials> shared_owner;
  // The attached client's registered buffers (null: registered tensors are refused).
  const RegisteredBuffers* registered = nullptr;
  // The most bytes a request carries inline (the worker's --max_inline_bytes), and so the
  // most an inline scatter that left its input out has the worker allocate for the ring.
  uint64_t max_inline_bytes = uint64_t{64} << 20;
};

// InvalidArgument ("invalid <field>: why") for a bad request, or one the client marked
// refused_by_client or shared without a shared_owner; SharedTensor::Open's error for a
// file that cannot be used. The job's deadline counts from this call.
absl::StatusOr<std::shared_ptr<CollectiveJob>> JobFromRequest(CollectiveKind rpc_kind,
                                                              const v1::CollectiveRequest& request,
                                                              const JobRequestLimits& limits);

// Every check of JobFromRequest that touches no file: the job with its inline data copied,
// or with its shared region's size checked but not opened (is_shared false). The seam the
// request fuzzer (fuzz/) runs, so that it never opens a file a fuzzed request names.
absl::StatusOr<std::shared_ptr<CollectiveJob>> CheckedJobFromRequest(
    CollectiveKind rpc_kind, const v1::CollectiveRequest& request, const JobRequestLimits& limits);

// The job that stands for a request JobFromRequest refused (`why`), so that the refusal
// takes the request's turn: it consumes the client's sequence number and the ring's,
// and fails that collective on every rank at once naming this rank and the reason,
// instead of leaving the ring and the client's next requests waiting. Null when the
// request has no usable client_sequence (then the RPC alone can be refused).
std::shared_ptr<CollectiveJob> RefusedJob(CollectiveKind rpc_kind,
                                          const v1::CollectiveRequest& request,
                                          const absl::Status& why, const JobRequestLimits& limits);

}  // namespace ringsync
