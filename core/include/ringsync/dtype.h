// Element types and reduction operators shared by every layer of ringsync, from the
// SDK's public surface (this header is part of it: it includes only Abseil and the
// standard library) down to the reducers.
//
// Thread-safety: everything here is a pure function of its arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringsync {

// The element types a collective may carry. Values are part of the wire
// contract (proto/ringsync/v1 mirrors them): never renumber.
enum class DType : uint8_t {
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,   // IEEE 754 binary16
  kBFloat16 = 4,  // bfloat16: float32 with the low 16 mantissa bits dropped
  kInt32 = 5,
  kInt64 = 6,
  kInt8 = 7,
  kUInt8 = 8,
};

// Reduction operators. Semantics per dtype are specified in core/reduce/reducer.h.
// Values are part of the wire contract: never renumber.
enum class ReduceOp : uint8_t {
  kSum = 1,
  kAvg = 2,
  kMin = 3,
  kMax = 4,
  kProd = 5,
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                       DType::kBFloat16, DType::kInt32,   DType::kInt64,
                                       DType::kInt8,    DType::kUInt8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProd};

// Bytes per element. REQUIRES: IsValid(dtype).
size_t DTypeSize(DType dtype);
bool IsFloatingPoint(DType dtype);
bool IsValid(DType dtype);
bool IsValid(ReduceOp op);

// Lower-case names as used in flags, logs and error messages: "float32", "bfloat16", "sum".
absl::string_view DTypeName(DType dtype);
absl::string_view ReduceOpName(ReduceOp op);

// Parse the names above; also accepts common aliases ("f32", "fp16", "bf16", "i32", "mean").
absl::StatusOr<DType> ParseDType(absl::string_view name);
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

}  // namespace ringsync
