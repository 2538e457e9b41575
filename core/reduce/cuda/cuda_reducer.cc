#include "core/reduce/cuda/cuda_reducer.h"

#include <cstdint>
#include <utility>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "core/reduce/cuda/cuda_status.h"
#include "core/reduce/cuda/pipeline_lane.h"
#include "core/reduce/cuda/reduce_kernels.h"

#ifndef RINGSYNC_CUDA_ARCHITECTURES
#define RINGSYNC_CUDA_ARCHITECTURES "unknown"
#endif

namespace ringsync {
namespace {

cuda::ScaleArgs PreScaleArgs(const ReduceSpec& spec) {
  return {.multiply = IsFloatingPoint(spec.dtype) && spec.pre_scale != 1.0,
          .factor = spec.pre_scale};
}

// Mirrors CpuReducer::Finalize step for step (dividing by 1 is skipped; once the
// kernel runs it always multiplies), so even a signaling NaN's bits agree.
cuda::ScaleArgs FinalizeArgs(const ReduceSpec& spec) {
  const bool divide = spec.op == ReduceOp::kAvg && spec.world_size != 1;
  return {.divide = divide,
          .divisor = spec.world_size,
          .multiply = IsFloatingPoint(spec.dtype) && (divide || spec.post_scale != 1.0),
          .factor = spec.post_scale};
}

// "cuda:N (NVIDIA H200, sm_90)" for messages about a device that exists.
std::string DescribeDevice(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
    cudaGetLastError();
    return absl::StrCat("cuda:", device);
  }
  return absl::StrCat("cuda:", device, " (", properties.name, ", sm_", properties.major,
                      properties.minor, ")");
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    cudaGetLastError();  // so the failure does not resurface in an unrelated call
    return absl::FailedPreconditionError(absl::StrCat("cudaGetDeviceCount: ",
                                                      cudaGetErrorString(error), " (",
                                                      cudaGetErrorName(error), ")"));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaReducer>> MakeCudaReducer(int device,
                                                             CudaReducerOptions options) {
  const std::string requested = absl::StrCat("cuda:", device, " requested but ");
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(requested, "device numbers start at 0"));
  }
  if (options.piece_bytes < 16) {
    return absl::InvalidArgumentError(
        absl::StrCat(requested, "piece_bytes ", options.piece_bytes, " is below 16"));
  }
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(requested, "no usable CUDA device: ", count.status().message()));
  }
  if (*count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        requested, "no usable CUDA device: cudaGetDeviceCount found no CUDA-capable device"));
  }
  if (device >= *count) {
    return absl::FailedPreconditionError(absl::StrCat(requested, "this machine has ", *count,
                                                      " CUDA device(s): cuda:0..cuda:", *count - 1));
  }
  // Create the context now (cudaFree(nullptr) is the idiom), so a busy, exclusive or
  // broken device fails here rather than inside the first collective.
  if (absl::Status s = cuda::CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(requested, "it is not usable: ", s.message()));
  }
  if (absl::Status s = cuda::CudaStatus(cudaFree(nullptr), "creating the CUDA context");
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(requested, "it is not usable: ", s.message()));
  }
  if (const cudaError_t error = cuda::CheckKernelImage(); error != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeDevice(device), " cannot run this binary's kernels, built for CUDA architectures ",
        RINGSYNC_CUDA_ARCHITECTURES, ": ", cudaGetErrorString(error),
        "; rebuild with -DCMAKE_CUDA_ARCHITECTURES including this device, or use "
        "--reduce_device=cpu"));
  }
  return std::make_unique<CudaReducer>(CudaReducer::Key{}, device, options);
}

CudaReducer::CudaReducer(Key, int device, CudaReducerOptions options)
    : device_(device), options_(options) {}

CudaReducer::~CudaReducer() = default;

std::string CudaReducer::name() const { return absl::StrCat("cuda:", device_); }

absl::StatusOr<std::unique_ptr<cuda::PipelineLane>> CudaReducer::AcquireLane() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_lanes_.empty()) {
      std::unique_ptr<cuda::PipelineLane> lane = std::move(idle_lanes_.back());
      idle_lanes_.pop_back();
      return lane;
    }
  }
  // Outside the lock: creating streams and buffers can take milliseconds.
  return cuda::PipelineLane::Create(device_, options_.piece_bytes);
}

void CudaReducer::ReleaseLane(std::unique_ptr<cuda::PipelineLane> lane) {
  absl::MutexLock lock(&mu_);
  idle_lanes_.push_back(std::move(lane));
}

absl::Status CudaReducer::OnLane(absl::string_view step, const ReduceSpec& spec, size_t count,
                                 absl::FunctionRef<absl::Status(cuda::PipelineLane&)> work) {
  const auto annotate = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(name(), " ", step, " of ", count, " x ",
                                               DTypeName(spec.dtype), ": ", s.message()));
  };
  if (absl::Status s = cuda::CudaStatus(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) {
    return annotate(s);
  }
  absl::StatusOr<std::unique_ptr<cuda::PipelineLane>> lane = AcquireLane();
  if (!lane.ok()) return annotate(lane.status());
  if (absl::Status s = work(**lane); !s.ok()) {
    // The lane is dropped (see AcquireLane); the buffer holds a mix of old and new values.
    return annotate(absl::Status(
        s.code(), absl::StrCat(s.message(), "; the buffer may be partially updated")));
  }
  ReleaseLane(*std::move(lane));
  return absl::OkStatus();
}

absl::Status CudaReducer::Combine(const ReduceSpec& spec, void* dst, const void* src, size_t count,
                                  ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateCombineBuffers("CudaReducer", dst, src, count, spec.dtype);
      !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();
  uint64_t overflows = 0;
  absl::Status s = OnLane("combine", spec, count, [&](cuda::PipelineLane& lane) {
    return lane.Combine(spec.dtype, spec.op, dst, src, count, &overflows);
  });
  if (stats != nullptr) stats->overflows += overflows;
  return s;
}

absl::Status CudaReducer::PreScale(const ReduceSpec& spec, void* buf, size_t count,
                                   ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateInPlaceBuffer("CudaReducer", buf, count); !s.ok()) return s;
  const cuda::ScaleArgs args = PreScaleArgs(spec);
  if (count == 0 || (!args.divide && !args.multiply)) return absl::OkStatus();
  uint64_t overflows = 0;
  absl::Status s = OnLane("pre-scale", spec, count, [&](cuda::PipelineLane& lane) {
    return lane.Scale(spec.dtype, args, buf, count, &overflows);
  });
  if (stats != nullptr) stats->overflows += overflows;
  return s;
}

absl::Status CudaReducer::Finalize(const ReduceSpec& spec, void* buf, size_t count,
                                   ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateInPlaceBuffer("CudaReducer", buf, count); !s.ok()) return s;
  const cuda::ScaleArgs args = FinalizeArgs(spec);
  if (count == 0 || (!args.divide && !args.multiply)) return absl::OkStatus();
  uint64_t overflows = 0;
  absl::Status s = OnLane("finalize", spec, count, [&](cuda::PipelineLane& lane) {
    return lane.Scale(spec.dtype, args, buf, count, &overflows);
  });
  if (stats != nullptr) stats->overflows += overflows;
  return s;
}

}  // namespace ringsync
