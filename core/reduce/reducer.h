// Reducer: the element-wise arithmetic of a collective, behind one interface so the
// ring algorithm never knows whether a CPU or a GPU does the math.
//
// Numerics contract (every implementation must produce the same bits):
//   * Floating types combine in a wide type and round once per combine:
//     float16/bfloat16 and float32 in float32, float64 in float64.
//   * SUM  : a + b.      PROD: a * b.
//   * MIN/MAX: NaN if either operand is NaN (IEEE 754-2019 minimum/maximum); otherwise
//     min = (b < a ? b : a), max = (b > a ? b : a), where a is dst and b is src, so
//     the sign of an equal zero follows dst.
//   * AVG  : combines like SUM; Finalize divides by world_size (true division in
//     float32, or float64 for float64), then multiplies by post_scale, then rounds once
//     to the element type.
//   * pre_scale multiplies every rank's contribution (PreScale), post_scale the result
//     (Finalize); both are computed in the wide type and rounded once. They apply to
//     floating types only; integer collectives must leave them at 1.
//   * Integers: SUM, PROD wrap modulo 2^bits (two's complement), like NCCL and MPI.
//     AVG is the wrapped sum divided by world_size, truncated toward zero (C++ '/').
//   * NaN and Inf propagate as IEEE 754 says; they are never replaced. A combine whose
//     finite operands give an infinite result counts as an overflow in ReduceStats.
//
// Thread-safety: a Reducer may be called from several threads at once on disjoint
// buffers. Buffers are host memory; `dst` and `src` must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ringsync/dtype.h"

namespace ringsync {

struct ReduceSpec {
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int world_size = 1;       // divisor of kAvg; >= 1
  double pre_scale = 1.0;   // multiplies each rank's input before combining
  double post_scale = 1.0;  // multiplies the final result
};

// Rejects invalid enums, world_size < 1, non-finite scales and scales on integer types.
absl::Status ValidateReduceSpec(const ReduceSpec& spec);

// The buffer checks every Reducer makes, so that all refuse the same calls. `reducer`
// names the implementation in messages ("CpuReducer").
// Combine: neither buffer may be null when count > 0, and they must not overlap (SIMD
// and GPU kernels load a block before storing it, so overlap would give answers that
// depend on the code path).
absl::Status ValidateCombineBuffers(absl::string_view reducer, const void* dst, const void* src,
                                    size_t count, DType dtype);
// PreScale, Finalize: the buffer may not be null when count > 0.
absl::Status ValidateInPlaceBuffer(absl::string_view reducer, const void* buf, size_t count);

// What a reducer observed; summed by the caller into metrics.
struct ReduceStats {
  uint64_t overflows = 0;  // finite operands whose result rounded to +-inf
};

class Reducer {
 public:
  virtual ~Reducer() = default;

  // "cpu" or "cuda:N": shown in logs and metrics.
  virtual std::string name() const = 0;

  // dst[i] = combine(dst[i], src[i]) for i < count.
  // REQUIRES: ValidateReduceSpec(spec).ok(); both buffers hold count elements.
  virtual absl::Status Combine(const ReduceSpec& spec, void* dst, const void* src, size_t count,
                               ReduceStats* stats) = 0;

  // buf[i] = buf[i] * pre_scale. A no-op when pre_scale == 1.
  virtual absl::Status PreScale(const ReduceSpec& spec, void* buf, size_t count,
                                ReduceStats* stats) = 0;

  // Turns a fully combined chunk into the collective's result: AVG division, then
  // post_scale. A no-op for non-AVG ops with post_scale == 1.
  virtual absl::Status Finalize(const ReduceSpec& spec, void* buf, size_t count,
                                ReduceStats* stats) = 0;
};

}  // namespace ringsync
