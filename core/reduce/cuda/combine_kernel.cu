// dst = combine(dst, src): one kernel template for every op, instantiated per dtype.
//
// Memory-bound: each element is read twice and written once, so the kernel's job is to
// keep enough 16-byte loads in flight. Each thread handles two vectors per grid-stride
// iteration (both loads issued before any arithmetic) and the grid fills every SM.
#include "core/reduce/cuda/device_numerics.cuh"
#include "core/reduce/cuda/kernel_launch.cuh"
#include "core/reduce/cuda/reduce_kernels.h"

namespace ringsync::cuda {
namespace {

template <typename E, typename Op, typename S = typename E::Storage>
__device__ __forceinline__ void CombineVec(Vec16<S>& a, const Vec16<S>& b, unsigned& overflows) {
#pragma unroll
  for (int k = 0; k < Vec16<S>::kLanes; ++k) {
    a.lane[k] = CombineOne<E, Op>(a.lane[k], b.lane[k], overflows);
  }
}

template <typename E, typename Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    CombineKernel(typename E::Storage* __restrict__ dst, const typename E::Storage* __restrict__ src,
                  size_t count, bool vectorized, unsigned long long* overflows) {
  using S = typename E::Storage;
  using V = Vec16<S>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned over = 0;
  size_t scalar_from = 0;
  if (vectorized) {
    const size_t vectors = count / V::kLanes;
    V* dv = reinterpret_cast<V*>(dst);
    const V* sv = reinterpret_cast<const V*>(src);
    size_t v = first;
    for (; v + stride < vectors; v += 2 * stride) {
      V a0, a1, b0, b1;
      a0.raw = dv[v].raw;
      a1.raw = dv[v + stride].raw;
      b0.raw = sv[v].raw;
      b1.raw = sv[v + stride].raw;
      CombineVec<E, Op>(a0, b0, over);
      CombineVec<E, Op>(a1, b1, over);
      dv[v].raw = a0.raw;
      dv[v + stride].raw = a1.raw;
    }
    if (v < vectors) {
      V a, b;
      a.raw = dv[v].raw;
      b.raw = sv[v].raw;
      CombineVec<E, Op>(a, b, over);
      dv[v].raw = a.raw;
    }
    scalar_from = vectors * V::kLanes;
  }
  for (size_t i = scalar_from + first; i < count; i += stride) {
    dst[i] = CombineOne<E, Op>(dst[i], src[i], over);
  }
  if constexpr (E::kFloating && Op::kCanOverflow) FlushOverflows(over, overflows);
}

template <typename E, typename Op>
cudaError_t Launch(void* dst, const void* src, size_t count, unsigned long long* overflows,
                   cudaStream_t stream) {
  using S = typename E::Storage;
  const bool vectorized = Aligned16(dst) && Aligned16(src);
  unsigned blocks = 0;
  const size_t items = vectorized ? (count + Vec16<S>::kLanes - 1) / Vec16<S>::kLanes : count;
  if (cudaError_t e = GridSize(items, &blocks); e != cudaSuccess) return e;
  CombineKernel<E, Op><<<blocks, kThreadsPerBlock, 0, stream>>>(
      static_cast<S*>(dst), static_cast<const S*>(src), count, vectorized, overflows);
  return cudaGetLastError();
}

template <typename E>
cudaError_t LaunchForOp(ReduceOp op, void* dst, const void* src, size_t count,
                        unsigned long long* overflows, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // AVG combines like SUM; Finalize divides
      return Launch<E, SumOp>(dst, src, count, overflows, stream);
    case ReduceOp::kProd:
      return Launch<E, ProdOp>(dst, src, count, overflows, stream);
    case ReduceOp::kMin:
      return Launch<E, MinOp>(dst, src, count, overflows, stream);
    case ReduceOp::kMax:
      return Launch<E, MaxOp>(dst, src, count, overflows, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchCombine(DType dtype, ReduceOp op, void* dst, const void* src, size_t count,
                          unsigned long long* overflows, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (dtype) {
    case DType::kFloat32: return LaunchForOp<Float32Elem>(op, dst, src, count, overflows, stream);
    case DType::kFloat64: return LaunchForOp<Float64Elem>(op, dst, src, count, overflows, stream);
    case DType::kFloat16: return LaunchForOp<Float16Elem>(op, dst, src, count, overflows, stream);
    case DType::kBFloat16: return LaunchForOp<BFloat16Elem>(op, dst, src, count, overflows, stream);
    case DType::kInt32: return LaunchForOp<IntElem<int32_t>>(op, dst, src, count, overflows, stream);
    case DType::kInt64: return LaunchForOp<IntElem<int64_t>>(op, dst, src, count, overflows, stream);
    case DType::kInt8: return LaunchForOp<IntElem<int8_t>>(op, dst, src, count, overflows, stream);
    case DType::kUInt8: return LaunchForOp<IntElem<uint8_t>>(op, dst, src, count, overflows, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t CheckKernelImage() {
  // Loading any one kernel proves the fatbin has code (SASS or PTX) for this device.
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, CombineKernel<Float32Elem, SumOp>);
}

}  // namespace ringsync::cuda
