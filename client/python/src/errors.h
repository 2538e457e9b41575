// The Python exceptions of the ringsync package, and the one place that turns an
// absl::Status from the SDK into one of them.
//
//   ringsync.Error (RuntimeError)         every failure the SDK or the ring reports;
//                                         .code is the status code's name ("ABORTED")
//     MismatchError                       ranks issued different collectives or specs
//     TimeoutError (+ builtins.TimeoutError)   a deadline passed
//     PeerLostError                       another rank's worker or training process went away
//     MembershipChangedError              the ring's membership changed (a worker evicted or
//                                         admitted, the ring re-formed): resync the state
//                                         (ringsync.ElasticState.sync); also named
//                                         MembershipChanged, its first name
//     WorkerUnavailable (+ ConnectionError)    this process's own worker is unreachable
//     InvalidArgument (+ ValueError)      the SDK or the worker refused an argument
//     InDoubtError                        failed here, but another rank may have completed
//                                         it (OutcomeMark::kInDoubt): resynchronise
//
// Bad Python arguments (wrong type, non-contiguous, GPU, read-only) are plain TypeError
// and ValueError, raised before anything reaches the SDK (tensor_arg.h).
#pragma once

#include "absl/status/status.h"
#include "pybind11/pybind11.h"

namespace ringsync::python {

// Which exception class a failed status becomes: a status marked membership changed
// (ringsync/outcome.h) is one; otherwise the phrases the ring and the worker write (daemon/worker/failure_cause.cc classifies the same messages for metrics).
enum class ErrorKind { kMismatch, kMembershipChanged, kPeerLost, kTimeout, kWorkerUnavailable,
                       kInvalidArgument, kInDoubt, kOther };
ErrorKind ClassifyError(const absl::Status& status);

// Creates the classes above as attributes of `module`. Call once, from the module's init.
void DefineErrors(pybind11::module_& module);

// Raises the exception for `status` (REQUIRES: !status.ok(), the GIL held).
[[noreturn]] void ThrowStatus(const absl::Status& status);

}  // namespace ringsync::python
