#include "core/reduce/cuda/pipeline_lane.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/reduce/cuda/cuda_status.h"

namespace ringsync::cuda {
namespace {

// True when [p, p + bytes) lies in page-locked host memory, so cudaMemcpyAsync on it is
// a true asynchronous DMA. Checks both ends: a registration might cover only the start.
bool IsPinned(const void* p, size_t bytes) {
  const auto pinned = [](const void* q) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, q) != cudaSuccess) {
      cudaGetLastError();  // pageable memory is not an error worth keeping
      return false;
    }
    return attributes.type == cudaMemoryTypeHost;
  };
  return bytes > 0 && pinned(p) && pinned(static_cast<const char*>(p) + bytes - 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineLane>> PipelineLane::Create(int device, size_t piece_bytes) {
  if (piece_bytes < 16) {
    return absl::InvalidArgumentError(absl::StrCat("piece_bytes ", piece_bytes, " < 16"));
  }
  absl::StatusOr<Stream> first = Stream::Create();
  if (!first.ok()) return first.status();
  absl::StatusOr<Stream> second = Stream::Create();
  if (!second.ok()) return second.status();
  auto lane = std::make_unique<PipelineLane>(
      Key{}, device, piece_bytes,
      std::array<Slot, 2>{Slot{.stream = *std::move(first)}, Slot{.stream = *std::move(second)}});
  if (absl::Status s = lane->counters_device_.Reserve(2 * sizeof(unsigned long long)); !s.ok()) return s;
  if (absl::Status s = lane->counters_pinned_.Reserve(2 * sizeof(unsigned long long)); !s.ok()) return s;
  return lane;
}

PipelineLane::PipelineLane(Key, int device, size_t piece_bytes, std::array<Slot, 2> slots)
    : device_(device), piece_bytes_(piece_bytes), slots_(std::move(slots)) {}

// Work still queued (after an error) may write into the pinned buffers: finish it before
// they are freed. Errors here have nowhere to go; the lane is being dropped anyway.
PipelineLane::~PipelineLane() {
  for (Slot& slot : slots_) cudaStreamSynchronize(slot.stream.get());
}

absl::Status PipelineLane::Combine(DType dtype, ReduceOp op, void* dst, const void* src,
                                   size_t count, uint64_t* overflows) {
  return Run(DTypeSize(dtype), dst, src, count,
             [dtype, op](void* d, const void* s, size_t n, unsigned long long* counter,
                         cudaStream_t stream) {
               return LaunchCombine(dtype, op, d, s, n, counter, stream);
             },
             overflows);
}

absl::Status PipelineLane::Scale(DType dtype, const ScaleArgs& args, void* buf, size_t count,
                                 uint64_t* overflows) {
  return Run(DTypeSize(dtype), buf, nullptr, count,
             [dtype, args](void* d, const void*, size_t n, unsigned long long* counter,
                           cudaStream_t stream) {
               return LaunchScale(dtype, args, d, n, counter, stream);
             },
             overflows);
}

absl::Status PipelineLane::Run(size_t element_size, void* dst, const void* src, size_t count,
                               const PieceKernel& kernel, uint64_t* overflows) {
  const size_t bytes = count * element_size;
  const Pinning pinning{.dst = IsPinned(dst, bytes), .src = src != nullptr && IsPinned(src, bytes)};
  const size_t piece_count = std::max<size_t>(piece_bytes_ / element_size, 1);
  auto* counters = static_cast<unsigned long long*>(counters_device_.data());
  for (int k = 0; k < 2; ++k) {
    RINGSYNC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(counters + k, 0, sizeof(*counters), slots_[k].stream.get()),
        "cudaMemsetAsync(overflow counter)");
  }
  size_t piece = 0;
  for (size_t done = 0; done < count; done += piece_count, ++piece) {
    Slot& slot = slots_[piece % 2];
    if (absl::Status s = Retire(slot); !s.ok()) return s;
    const size_t offset = done * element_size;
    if (absl::Status s = Launch(slot, counters + piece % 2, static_cast<char*>(dst) + offset,
                                src ? static_cast<const char*>(src) + offset : nullptr,
                                std::min(piece_count, count - done), element_size, pinning, kernel);
        !s.ok()) {
      return s;
    }
  }
  auto* counts_host = static_cast<unsigned long long*>(counters_pinned_.data());
  for (int k = 0; k < 2; ++k) {
    RINGSYNC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(counts_host + k, counters + k, sizeof(*counters), cudaMemcpyDeviceToHost,
                        slots_[k].stream.get()),
        "cudaMemcpyAsync(overflow counter)");
  }
  // Oldest piece first, so results land in the caller's buffer in order.
  for (size_t k = 0; k < 2; ++k) {
    if (absl::Status s = Retire(slots_[(piece + k) % 2]); !s.ok()) return s;
  }
  if (overflows != nullptr) *overflows += counts_host[0] + counts_host[1];
  return absl::OkStatus();
}

absl::Status PipelineLane::Launch(Slot& slot, unsigned long long* counter, char* dst,
                                  const char* src, size_t count, size_t element_size,
                                  Pinning pinning, const PieceKernel& kernel) {
  const size_t bytes = count * element_size;
  const cudaStream_t stream = slot.stream.get();
  if (absl::Status s = slot.dst_device.Reserve(bytes); !s.ok()) return s;
  if (!pinning.dst) {
    if (absl::Status s = slot.dst_pinned.Reserve(bytes); !s.ok()) return s;
    std::memcpy(slot.dst_pinned.data(), dst, bytes);
  }
  const void* dst_from = pinning.dst ? static_cast<const void*>(dst) : slot.dst_pinned.data();
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(slot.dst_device.data(), dst_from, bytes, cudaMemcpyHostToDevice, stream),
      "cudaMemcpyAsync(dst piece to device)");
  if (src != nullptr) {
    if (absl::Status s = slot.src_device.Reserve(bytes); !s.ok()) return s;
    if (!pinning.src) {
      if (absl::Status s = slot.src_pinned.Reserve(bytes); !s.ok()) return s;
      std::memcpy(slot.src_pinned.data(), src, bytes);
    }
    const void* src_from = pinning.src ? static_cast<const void*>(src) : slot.src_pinned.data();
    RINGSYNC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(slot.src_device.data(), src_from, bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync(src piece to device)");
  }
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      kernel(slot.dst_device.data(), src ? slot.src_device.data() : nullptr, count, counter, stream),
      "reduction kernel launch");
  void* result_into = pinning.dst ? static_cast<void*>(dst) : slot.dst_pinned.data();
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(result_into, slot.dst_device.data(), bytes, cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync(result to host)");
  slot.result_to = pinning.dst ? nullptr : dst;
  slot.result_bytes = bytes;
  return absl::OkStatus();
}

absl::Status PipelineLane::Retire(Slot& slot) {
  RINGSYNC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(slot.stream.get()),
                                absl::StrCat("reduction on cuda:", device_));
  if (slot.result_to != nullptr) std::memcpy(slot.result_to, slot.dst_pinned.data(), slot.result_bytes);
  slot.result_to = nullptr;
  slot.result_bytes = 0;
  return absl::OkStatus();
}

}  // namespace ringsync::cuda
