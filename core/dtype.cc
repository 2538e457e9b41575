#include "ringsync/dtype.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ringsync {
namespace {

constexpr std::pair<absl::string_view, DType> kDTypeNames[] = {
    {"float32", DType::kFloat32}, {"f32", DType::kFloat32},   {"float", DType::kFloat32},
    {"float64", DType::kFloat64}, {"f64", DType::kFloat64},   {"double", DType::kFloat64},
    {"float16", DType::kFloat16}, {"f16", DType::kFloat16},   {"fp16", DType::kFloat16},
    {"half", DType::kFloat16},    {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16},
    {"int32", DType::kInt32},     {"i32", DType::kInt32},     {"int64", DType::kInt64},
    {"i64", DType::kInt64},       {"int8", DType::kInt8},     {"i8", DType::kInt8},
    {"uint8", DType::kUInt8},     {"u8", DType::kUInt8},
};

constexpr std::pair<absl::string_view, ReduceOp> kOpNames[] = {
    {"sum", ReduceOp::kSum},   {"avg", ReduceOp::kAvg},   {"mean", ReduceOp::kAvg},
    {"min", ReduceOp::kMin},   {"max", ReduceOp::kMax},   {"prod", ReduceOp::kProd},
    {"product", ReduceOp::kProd},
};

}  // namespace

bool IsValid(DType dtype) {
  return static_cast<uint8_t>(dtype) >= 1 && static_cast<uint8_t>(dtype) <= 8;
}

bool IsValid(ReduceOp op) {
  return static_cast<uint8_t>(op) >= 1 && static_cast<uint8_t>(op) <= 5;
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
  }
  return "invalid-dtype";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProd: return "prod";
  }
  return "invalid-op";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const auto& [text, dtype] : kDTypeNames) {
    if (lower == text) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", name,
      "'; expected one of float32, float64, float16, bfloat16, int32, int64, int8, uint8"));
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const auto& [text, op] : kOpNames) {
    if (lower == text) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op '", name, "'; expected one of sum, avg, min, max, prod"));
}

}  // namespace ringsync
