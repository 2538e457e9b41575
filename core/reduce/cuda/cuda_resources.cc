#include "core/reduce/cuda/cuda_resources.h"

#include <bit>

#include "absl/strings/str_cat.h"
#include "core/reduce/cuda/cuda_status.h"

namespace ringsync::cuda {

absl::StatusOr<Stream> Stream::Create() {
  cudaStream_t stream = nullptr;
  RINGSYNC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags");
  return Stream(stream);
}

absl::StatusOr<Event> Event::Create(bool timing) {
  cudaEvent_t event = nullptr;
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
      "cudaEventCreateWithFlags");
  return Event(event);
}

void Buffer::Free::operator()(void* p) const {
  if (kind == Kind::kDevice) {
    cudaFree(p);
  } else {
    cudaFreeHost(p);
  }
}

absl::Status Buffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return absl::OkStatus();
  // Round up to a power of two (at least 64 KiB) so a run of slowly growing requests
  // costs a logarithmic number of allocations.
  const size_t rounded = std::bit_ceil(bytes < (size_t{64} << 10) ? (size_t{64} << 10) : bytes);
  data_.reset();  // free first: the old and new buffer need not fit together
  capacity_ = 0;
  void* p = nullptr;
  if (kind_ == Kind::kDevice) {
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, rounded),
                                  absl::StrCat("cudaMalloc(", rounded, " bytes)"));
  } else {
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, rounded),
                                  absl::StrCat("cudaMallocHost(", rounded, " bytes)"));
  }
  data_.reset(p);
  capacity_ = rounded;
  return absl::OkStatus();
}

}  // namespace ringsync::cuda
