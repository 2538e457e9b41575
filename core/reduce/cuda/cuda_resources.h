// RAII owners for the CUDA objects the reducer keeps between calls: streams, events,
// device buffers and pinned (page-locked) host buffers.
//
// Buffers grow and never shrink: a reducer reserves the largest piece it has seen and
// reuses it for every later segment, so the steady state allocates nothing (cudaMalloc
// and cudaMallocHost synchronize the device and cost far more than a segment's copy).
//
// Thread-safety: none; each object belongs to one pipeline lane at a time.
// REQUIRES for every Create/Reserve: the owning device is the calling thread's current
// device (cudaSetDevice).
#pragma once

#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringsync::cuda {

class Stream {
 public:
  // A non-blocking stream: it never waits on the legacy default stream, which other
  // code in the process may use.
  static absl::StatusOr<Stream> Create();
  cudaStream_t get() const { return stream_.get(); }

 private:
  struct Destroy {
    void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
  };
  explicit Stream(cudaStream_t stream) : stream_(stream) {}
  std::unique_ptr<CUstream_st, Destroy> stream_;
};

class Event {
 public:
  // timing=false makes record/wait cheaper; benchmarks ask for timing.
  static absl::StatusOr<Event> Create(bool timing = false);
  cudaEvent_t get() const { return event_.get(); }

 private:
  struct Destroy {
    void operator()(cudaEvent_t event) const { cudaEventDestroy(event); }
  };
  explicit Event(cudaEvent_t event) : event_(event) {}
  std::unique_ptr<CUevent_st, Destroy> event_;
};

// Grow-only byte buffer in device memory (kDevice) or pinned host memory (kPinnedHost).
// Pinned memory is what lets cudaMemcpyAsync run as DMA concurrently with kernels and
// with the host; pageable memory would be staged synchronously by the driver.
class Buffer {
 public:
  enum class Kind { kDevice, kPinnedHost };
  explicit Buffer(Kind kind) : kind_(kind) {}

  // Ensures capacity() >= bytes. Old contents are lost when it grows.
  absl::Status Reserve(size_t bytes);
  void* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    Kind kind;
    void operator()(void* p) const;
  };
  Kind kind_;
  std::unique_ptr<void, Free> data_{nullptr, Free{kind_}};
  size_t capacity_ = 0;
};

}  // namespace ringsync::cuda
