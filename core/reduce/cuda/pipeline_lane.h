// PipelineLane: runs one host-to-host reduction through the GPU as a double-buffered
// pipeline of pieces, so host staging, DMA and kernels overlap.
//
// The Reducer interface hands us pageable host memory. For each piece of at most
// `piece_bytes` per operand, slot i % 2 does
//     host memcpy -> pinned staging -> (H2D) device -> kernel -> (D2H) pinned staging
// on its own stream, and the result is copied back into the caller's buffer the next
// time the slot comes round. While the GPU works on piece i, the host copies out piece
// i-1 and stages piece i+1; with two streams the H2D copy of one slot also overlaps the
// D2H copy of the other (separate copy engines).
//
// Buffers (device and pinned) are reserved once for the largest piece and reused.
// When the caller's buffer is itself page-locked (cudaMallocHost / cudaHostRegister,
// e.g. a daemon that pins its working buffers) the lane skips the staging memcpy and
// DMAs straight from and to it: the host then touches no byte of the data at all.
//
// Thread-safety: none; a lane is used by one call at a time (CudaReducer pools lanes).
// After a method returns an error the lane must be discarded: its streams may still
// hold work, or the CUDA context may be broken.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringsync/dtype.h"
#include "core/reduce/cuda/cuda_resources.h"
#include "core/reduce/cuda/reduce_kernels.h"

namespace ringsync::cuda {

class PipelineLane {
 public:
  // REQUIRES: `device` is the calling thread's current device; piece_bytes >= 16.
  static absl::StatusOr<std::unique_ptr<PipelineLane>> Create(int device, size_t piece_bytes);

  // dst[i] = combine(dst[i], src[i]); host pointers, any alignment.
  absl::Status Combine(DType dtype, ReduceOp op, void* dst, const void* src, size_t count,
                       uint64_t* overflows);

  // buf[i] = scale(buf[i]); host pointer, any alignment.
  absl::Status Scale(DType dtype, const ScaleArgs& args, void* buf, size_t count,
                     uint64_t* overflows);

  int device() const { return device_; }

 private:
  struct Slot;

 public:
  // Only Create can name the key, so a lane always starts with streams and counters.
  class Key {
    friend class PipelineLane;
    Key() = default;
  };
  PipelineLane(Key, int device, size_t piece_bytes, std::array<Slot, 2> slots);
  ~PipelineLane();

 private:
  struct Slot {
    Stream stream;
    Buffer dst_device{Buffer::Kind::kDevice};
    Buffer src_device{Buffer::Kind::kDevice};
    Buffer dst_pinned{Buffer::Kind::kPinnedHost};
    Buffer src_pinned{Buffer::Kind::kPinnedHost};
    // The piece in flight: where its result goes once the stream has finished (null
    // when the D2H copy already wrote it there).
    char* result_to = nullptr;
    size_t result_bytes = 0;
  };
  // The kernel for one piece, on device pointers; src is null for Scale.
  using PieceKernel = std::function<cudaError_t(void* dst, const void* src, size_t count,
                                                unsigned long long* overflows, cudaStream_t)>;

  absl::Status Run(size_t element_size, void* dst, const void* src, size_t count,
                   const PieceKernel& kernel, uint64_t* overflows);
  // Where the caller's buffers are page-locked, so DMA can use them directly.
  struct Pinning {
    bool dst = false;
    bool src = false;
  };
  absl::Status Launch(Slot& slot, unsigned long long* counter, char* dst, const char* src,
                      size_t count, size_t element_size, Pinning pinning,
                      const PieceKernel& kernel);
  // Waits for the slot's piece and copies its result into the caller's buffer.
  absl::Status Retire(Slot& slot);

  int device_;
  size_t piece_bytes_;
  std::array<Slot, 2> slots_;
  Buffer counters_device_{Buffer::Kind::kDevice};  // one overflow counter per slot
  Buffer counters_pinned_{Buffer::Kind::kPinnedHost};
};

}  // namespace ringsync::cuda
