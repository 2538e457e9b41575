// Test helpers: typed access to byte buffers and input generators for ring tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ringsync/dtype.h"
#include "core/half.h"

namespace ringsync::testing {

using Bytes = std::vector<std::byte>;

// Writes `value` as element i of a buffer of `dtype` (narrow floats round to nearest even).
inline void SetElement(DType dtype, Bytes& buf, size_t i, double value) {
  std::byte* p = buf.data() + i * DTypeSize(dtype);
  auto put = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (dtype) {
    case DType::kFloat32: put(static_cast<float>(value)); break;
    case DType::kFloat64: put(value); break;
    case DType::kFloat16: put(FloatToFloat16(static_cast<float>(value))); break;
    case DType::kBFloat16: put(FloatToBFloat16(static_cast<float>(value))); break;
    case DType::kInt32: put(static_cast<int32_t>(value)); break;
    case DType::kInt64: put(static_cast<int64_t>(value)); break;
    case DType::kInt8: put(static_cast<int8_t>(value)); break;
    case DType::kUInt8: put(static_cast<uint8_t>(value)); break;
  }
}

inline double GetElement(DType dtype, const Bytes& buf, size_t i) {
  const std::byte* p = buf.data() + i * DTypeSize(dtype);
  auto get = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kFloat32: return get(float{});
    case DType::kFloat64: return get(double{});
    case DType::kFloat16: return Float16ToFloat(get(uint16_t{}));
    case DType::kBFloat16: return BFloat16ToFloat(get(uint16_t{}));
    case DType::kInt32: return get(int32_t{});
    case DType::kInt64: return static_cast<double>(get(int64_t{}));
    case DType::kInt8: return get(int8_t{});
    case DType::kUInt8: return get(uint8_t{});
  }
  return 0;
}

inline Bytes MakeBuffer(DType dtype, size_t count) { return Bytes(count * DTypeSize(dtype)); }

// Small integers whose combination under `op` is exact in every dtype for N <= 16, so a
// naive reference in double needs no rounding model.
inline Bytes ExactInput(DType dtype, ReduceOp op, size_t count, int rank, uint32_t seed) {
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(rank));
  Bytes buf = MakeBuffer(dtype, count);
  const bool is_unsigned = dtype == DType::kUInt8;
  for (size_t i = 0; i < count; ++i) {
    double v = 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        v = is_unsigned ? static_cast<double>(rng() % 8) : static_cast<double>(rng() % 9) - 4;
        break;
      case ReduceOp::kMin:
      case ReduceOp::kMax:
        v = is_unsigned ? static_cast<double>(rng() % 200) : static_cast<double>(rng() % 201) - 100;
        break;
      case ReduceOp::kProd:
        // Mostly +-1; ranks 0 and 1 may contribute a 2, so |product| <= 4.
        v = (rank < 2 && rng() % 3 == 0) ? 2 : ((rng() % 2 == 0 || is_unsigned) ? 1 : -1);
        break;
    }
    SetElement(dtype, buf, i, v);
  }
  return buf;
}

// Random floating values in [-1, 1) (any dtype; integers get small random values).
inline Bytes RandomInput(DType dtype, size_t count, int rank, uint32_t seed) {
  std::mt19937 rng(seed * 104729u + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Bytes buf = MakeBuffer(dtype, count);
  for (size_t i = 0; i < count; ++i) {
    SetElement(dtype, buf, i, IsFloatingPoint(dtype) ? dist(rng) : static_cast<double>(rng() % 50));
  }
  return buf;
}

// Naive reference for ExactInput data: combines in double, which is exact for those
// values; AVG follows the contract (float32 division, or float64, or truncation).
inline double NaiveReduce(DType dtype, ReduceOp op, const std::vector<double>& values) {
  double acc = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += values[i]; break;
      case ReduceOp::kProd: acc *= values[i]; break;
      case ReduceOp::kMin: acc = std::min(acc, values[i]); break;
      case ReduceOp::kMax: acc = std::max(acc, values[i]); break;
    }
  }
  if (op != ReduceOp::kAvg) return acc;
  const double n = static_cast<double>(values.size());
  if (dtype == DType::kFloat64) return acc / n;
  if (IsFloatingPoint(dtype)) return static_cast<float>(acc) / static_cast<float>(n);
  return std::trunc(acc / n);
}

}  // namespace ringsync::testing
