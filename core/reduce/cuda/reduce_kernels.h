// Element-wise reduction kernels on DEVICE pointers, launched asynchronously on a
// stream. The CUDA reducer's pipeline calls them on its staging buffers; benchmarks and
// tests call them directly to time or probe the kernels without host copies.
//
// Any alignment works; when dst and src are both 16-byte aligned the kernels move 16
// bytes per load and store. Numerics: core/reduce/cuda/device_numerics.cuh.
//
// Thread-safety: launches on distinct streams may run concurrently.
// REQUIRES: the current device (cudaSetDevice) owns the pointers and the stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "ringsync/dtype.h"

namespace ringsync::cuda {

// What PreScale / Finalize do to each element: optionally divide by an integer (AVG),
// then optionally multiply by a factor. The factor applies to floating types only and
// is rounded to float32 for every type but float64, as the numerics contract says.
struct ScaleArgs {
  bool divide = false;
  int64_t divisor = 1;
  bool multiply = false;
  double factor = 1.0;
};

// dst[i] = combine(dst[i], src[i]) for i < count. kAvg combines like kSum. Adds the
// number of finite-operand results that rounded to +-inf to *overflows (a device
// counter; the caller zeroes it).
cudaError_t LaunchCombine(DType dtype, ReduceOp op, void* dst, const void* src, size_t count,
                          unsigned long long* overflows, cudaStream_t stream);

// buf[i] = scale(buf[i]) for i < count, same overflow counting.
cudaError_t LaunchScale(DType dtype, const ScaleArgs& args, void* buf, size_t count,
                        unsigned long long* overflows, cudaStream_t stream);

// cudaSuccess when the current device can run this build's kernels; otherwise e.g.
// cudaErrorNoKernelImageForDevice on a GPU older than every built architecture.
cudaError_t CheckKernelImage();

}  // namespace ringsync::cuda
