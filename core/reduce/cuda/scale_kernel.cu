// buf = scale(buf): the PreScale and Finalize steps (AVG division, pre/post factors),
// one kernel template instantiated per dtype.
#include "core/reduce/cuda/device_numerics.cuh"
#include "core/reduce/cuda/kernel_launch.cuh"
#include "core/reduce/cuda/reduce_kernels.h"

namespace ringsync::cuda {
namespace {

template <typename E>
__global__ void __launch_bounds__(kThreadsPerBlock)
    ScaleKernel(typename E::Storage* __restrict__ buf, size_t count, bool vectorized,
                WideScale<typename E::Wide> p, unsigned long long* overflows) {
  using S = typename E::Storage;
  using V = Vec16<S>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned over = 0;
  size_t scalar_from = 0;
  if (vectorized) {
    const size_t vectors = count / V::kLanes;
    V* bv = reinterpret_cast<V*>(buf);
    for (size_t v = first; v < vectors; v += stride) {
      V x;
      x.raw = bv[v].raw;
#pragma unroll
      for (int k = 0; k < V::kLanes; ++k) x.lane[k] = ScaleOne<E>(x.lane[k], p, over);
      bv[v].raw = x.raw;
    }
    scalar_from = vectors * V::kLanes;
  }
  for (size_t i = scalar_from + first; i < count; i += stride) buf[i] = ScaleOne<E>(buf[i], p, over);
  if constexpr (E::kFloating) FlushOverflows(over, overflows);
}

template <typename E>
cudaError_t Launch(const ScaleArgs& args, void* buf, size_t count, unsigned long long* overflows,
                   cudaStream_t stream) {
  using S = typename E::Storage;
  using W = typename E::Wide;
  WideScale<W> p{};
  p.divide = args.divide;
  p.multiply = args.multiply && E::kFloating;
  p.divisor = static_cast<W>(args.divisor);
  p.idivisor = static_cast<long long>(args.divisor);
  p.factor = static_cast<W>(args.factor);  // double -> float rounds to nearest even
  if (p.idivisor == 0) return cudaErrorInvalidValue;
  const bool vectorized = Aligned16(buf);
  unsigned blocks = 0;
  const size_t items = vectorized ? (count + Vec16<S>::kLanes - 1) / Vec16<S>::kLanes : count;
  if (cudaError_t e = GridSize(items, &blocks); e != cudaSuccess) return e;
  ScaleKernel<E><<<blocks, kThreadsPerBlock, 0, stream>>>(static_cast<S*>(buf), count, vectorized,
                                                          p, overflows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchScale(DType dtype, const ScaleArgs& args, void* buf, size_t count,
                        unsigned long long* overflows, cudaStream_t stream) {
  if (count == 0 || (!args.divide && !args.multiply)) return cudaSuccess;
  switch (dtype) {
    case DType::kFloat32: return Launch<Float32Elem>(args, buf, count, overflows, stream);
    case DType::kFloat64: return Launch<Float64Elem>(args, buf, count, overflows, stream);
    case DType::kFloat16: return Launch<Float16Elem>(args, buf, count, overflows, stream);
    case DType::kBFloat16: return Launch<BFloat16Elem>(args, buf, count, overflows, stream);
    case DType::kInt32: return Launch<IntElem<int32_t>>(args, buf, count, overflows, stream);
    case DType::kInt64: return Launch<IntElem<int64_t>>(args, buf, count, overflows, stream);
    case DType::kInt8: return Launch<IntElem<int8_t>>(args, buf, count, overflows, stream);
    case DType::kUInt8: return Launch<IntElem<uint8_t>>(args, buf, count, overflows, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ringsync::cuda
