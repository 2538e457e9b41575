#include "core/reduce/reducer.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

absl::Status CheckScale(const ReduceSpec& spec, const char* field, double value) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceSpec.", field, " is ", value, "; it must be a finite number (1 for no scaling)"));
  }
  if (!IsFloatingPoint(spec.dtype) && value != 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceSpec.", field, " is ", value, " but dtype ", DTypeName(spec.dtype),
                     " is an integer type; scales apply to floating types only: leave ", field,
                     " at 1 (scale on the caller's side, or reduce in float32)"));
  }
  return absl::OkStatus();
}

absl::Status NotNull(absl::string_view reducer, const char* what, const void* buf, size_t count) {
  if (buf == nullptr && count > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reducer, ": ", what, " is null but count is ", count));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateReduceSpec(const ReduceSpec& spec) {
  if (!IsValid(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceSpec.dtype has invalid value ", static_cast<int>(spec.dtype),
        "; expected one of float32, float64, float16, bfloat16, int32, int64, int8, uint8"));
  }
  if (!IsValid(spec.op)) {
    return absl::InvalidArgumentError(absl::StrCat("ReduceSpec.op has invalid value ",
                                                   static_cast<int>(spec.op),
                                                   "; expected one of sum, avg, min, max, prod"));
  }
  if (spec.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceSpec.world_size is ", spec.world_size,
                     "; it must be the number of ranks in the ring, at least 1"));
  }
  if (absl::Status s = CheckScale(spec, "pre_scale", spec.pre_scale); !s.ok()) return s;
  return CheckScale(spec, "post_scale", spec.post_scale);
}

absl::Status ValidateInPlaceBuffer(absl::string_view reducer, const void* buf, size_t count) {
  return NotNull(reducer, "buf", buf, count);
}

absl::Status ValidateCombineBuffers(absl::string_view reducer, const void* dst, const void* src,
                                    size_t count, DType dtype) {
  if (absl::Status s = NotNull(reducer, "dst", dst, count); !s.ok()) return s;
  if (absl::Status s = NotNull(reducer, "src", src, count); !s.ok()) return s;
  const size_t bytes = count * DTypeSize(dtype);
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (bytes > 0 && d < s + bytes && s < d + bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(reducer, "::Combine: dst and src overlap (", bytes,
                     " bytes each); combine into a separate receive buffer"));
  }
  return absl::OkStatus();
}

}  // namespace ringsync
