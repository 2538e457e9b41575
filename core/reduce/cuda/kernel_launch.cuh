// What every reduction kernel shares: block shape, grid sizing, the 16-byte vector type
// and the per-warp flush of overflow counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace ringsync::cuda {

inline constexpr int kThreadsPerBlock = 256;
// 8 blocks of 256 threads fill an SM (2048 resident threads on sm_80/sm_90); more
// blocks than that only add scheduling work to a grid-stride loop.
inline constexpr int kBlocksPerSm = 8;

// Blocks for `items` grid-stride work items on the current device.
inline cudaError_t GridSize(size_t items, unsigned* blocks) {
  int device = 0;
  int sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return e;
  }
  const size_t wanted = (items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const size_t cap = static_cast<size_t>(sms) * kBlocksPerSm;
  *blocks = static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
  return cudaSuccess;
}

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16 bytes of elements, loaded and stored as one uint4.
template <typename S>
union Vec16 {
  static constexpr int kLanes = 16 / sizeof(S);
  uint4 raw;
  S lane[kLanes];
};

// One atomic per warp instead of per thread. Every thread of the block must call it.
__device__ __forceinline__ void FlushOverflows(unsigned count, unsigned long long* total) {
  constexpr unsigned kAllLanes = 0xffffffffu;
  if (!__any_sync(kAllLanes, count != 0)) return;
  const unsigned warp_total = __reduce_add_sync(kAllLanes, count);
  if ((threadIdx.x & 31u) == 0) atomicAdd(total, static_cast<unsigned long long>(warp_total));
}

}  // namespace ringsync::cuda
