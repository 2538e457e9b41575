#include "core/reduce/cpu_reducer.h"

#include <cstdint>

#include "core/reduce/cpu_kernels.h"

namespace ringsync {
namespace {

// Stats are optional and accumulate, so one ReduceStats can follow a whole collective.
void Record(ReduceStats* stats, uint64_t overflows) {
  if (stats != nullptr) stats->overflows += overflows;
}

size_t Slot(DType dtype) { return static_cast<size_t>(dtype); }

}  // namespace

CpuReducer::CpuReducer(Isa isa) : kernels_(&cpu_kernels::PortableKernels()) {
  const cpu_kernels::KernelTable* avx512 =
      isa == Isa::kBest ? cpu_kernels::Avx512Kernels() : nullptr;
  const cpu_kernels::KernelTable* avx2 =
      isa != Isa::kPortable ? cpu_kernels::Avx2Kernels() : nullptr;
  if (avx512 != nullptr) {
    kernels_ = avx512;
  } else if (avx2 != nullptr) {
    kernels_ = avx2;
  }
}

std::string_view CpuReducer::isa() const { return kernels_->isa; }

absl::Status CpuReducer::Combine(const ReduceSpec& spec, void* dst, const void* src, size_t count,
                                 ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateCombineBuffers("CpuReducer", dst, src, count, spec.dtype);
      !s.ok()) {
    return s;
  }
  const cpu_kernels::CombineFn fn =
      kernels_->combine[Slot(spec.dtype)][static_cast<size_t>(spec.op)];
  Record(stats, fn(dst, src, count));
  return absl::OkStatus();
}

absl::Status CpuReducer::PreScale(const ReduceSpec& spec, void* buf, size_t count,
                                  ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateInPlaceBuffer("CpuReducer", buf, count); !s.ok()) return s;
  if (spec.pre_scale == 1.0) return absl::OkStatus();  // also every integer spec
  Record(stats, kernels_->scale[Slot(spec.dtype)](buf, count, 1, spec.pre_scale));
  return absl::OkStatus();
}

absl::Status CpuReducer::Finalize(const ReduceSpec& spec, void* buf, size_t count,
                                  ReduceStats* stats) {
  if (absl::Status s = ValidateReduceSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateInPlaceBuffer("CpuReducer", buf, count); !s.ok()) return s;
  const int divisor = spec.op == ReduceOp::kAvg ? spec.world_size : 1;
  if (divisor == 1 && spec.post_scale == 1.0) return absl::OkStatus();
  Record(stats, kernels_->scale[Slot(spec.dtype)](buf, count, divisor, spec.post_scale));
  return absl::OkStatus();
}

}  // namespace ringsync
