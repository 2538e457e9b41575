// Turns CUDA runtime errors into absl::Status values that name the failed call and
// carry CUDA's own text, so a user sees e.g.
//   "cudaMalloc(268435456 bytes) on cuda:0: out of memory (cudaErrorMemoryAllocation)".
//
// Thread-safety: pure functions.
#pragma once


#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringsync::cuda {

// "<what>: <cudaGetErrorString> (<cudaGetErrorName>)" with a code that matches the
// failure: ResourceExhausted for allocations, FailedPrecondition for a missing or
// unusable driver/device, Internal otherwise. OK for cudaSuccess.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

}  // namespace ringsync::cuda

// Evaluates a CUDA runtime call; returns its error as a Status from the enclosing
// function. `what` names the call for the message.
#define RINGSYNC_CUDA_RETURN_IF_ERROR(call, what)                              \
  do {                                                                         \
    if (const cudaError_t ringsync_cuda_error_ = (call);                       \
        ringsync_cuda_error_ != cudaSuccess) {                                 \
      return ::ringsync::cuda::CudaStatus(ringsync_cuda_error_, (what));       \
    }                                                                          \
  } while (false)
