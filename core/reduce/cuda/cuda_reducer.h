// CudaReducer: the Reducer interface on one CUDA device. Callers pass HOST buffers (the
// daemon's buffers live in host memory); the reducer stages them through the GPU in a
// pipeline (core/reduce/cuda/pipeline_lane.h) and produces the same bits as the CPU
// reducer (numerics contract: core/reduce/reducer.h).
//
// Plain C++: usable from code compiled without nvcc. The binary links the CUDA runtime
// statically, so it starts on machines without a driver; there the functions below
// return FailedPrecondition with CUDA's own error text.
//
// Thread-safety: Combine/PreScale/Finalize may be called from several threads at once
// on disjoint buffers; each concurrent call gets its own pipeline lane (streams and
// buffers, kept for reuse). Calls set the calling thread's current CUDA device.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/reduce/reducer.h"

namespace ringsync {

namespace cuda {
class PipelineLane;
}  // namespace cuda

// Number of CUDA devices, or FailedPrecondition carrying cudaGetDeviceCount's error
// text ("CUDA driver version is insufficient for CUDA runtime version", "no
// CUDA-capable device is detected", ...). 0 devices with no error is returned as 0.
absl::StatusOr<int> CudaDeviceCount();

struct CudaReducerOptions {
  // Bytes per operand and pipeline piece. Small enough that a 1-4 MiB ring segment
  // still splits into pieces whose copies and kernels overlap, large enough that the
  // ~10 us per-piece launch cost stays small. Tests turn it down to force many pieces.
  size_t piece_bytes = size_t{1} << 20;
};

class CudaReducer;

// A reducer on CUDA device `device`. Fails now, not at the first reduction, when the
// device does not exist, cannot be initialized, or is older than every architecture
// this binary was built for; the message says which and carries CUDA's text.
absl::StatusOr<std::unique_ptr<CudaReducer>> MakeCudaReducer(int device,
                                                             CudaReducerOptions options = {});

class CudaReducer final : public Reducer {
 public:
  class Key {
    friend absl::StatusOr<std::unique_ptr<CudaReducer>> MakeCudaReducer(int, CudaReducerOptions);
    Key() = default;
  };

  // Only MakeCudaReducer can name the key: it checks the device first.
  CudaReducer(Key, int device, CudaReducerOptions options);
  ~CudaReducer() override;

  std::string name() const override;  // "cuda:N"
  int device() const { return device_; }

  absl::Status Combine(const ReduceSpec& spec, void* dst, const void* src, size_t count,
                       ReduceStats* stats) override;
  absl::Status PreScale(const ReduceSpec& spec, void* buf, size_t count,
                        ReduceStats* stats) override;
  absl::Status Finalize(const ReduceSpec& spec, void* buf, size_t count,
                        ReduceStats* stats) override;

 private:
  // AcquireLane takes an idle lane or makes one; ReleaseLane returns it for reuse. A lane whose call
  // failed is dropped instead (it may hold queued work or a broken context).
  absl::StatusOr<std::unique_ptr<cuda::PipelineLane>> AcquireLane();
  void ReleaseLane(std::unique_ptr<cuda::PipelineLane> lane);
  // Runs `step` on a lane with this reducer's device current; names the reducer, the
  // step and the buffer in any error.
  absl::Status OnLane(absl::string_view step, const ReduceSpec& spec, size_t count,
                      absl::FunctionRef<absl::Status(cuda::PipelineLane&)> work);

  const int device_;
  const CudaReducerOptions options_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<cuda::PipelineLane>> idle_lanes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringsync
