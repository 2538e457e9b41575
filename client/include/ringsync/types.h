// Element types and reduction operators as the SDK's user sees them.
//
// DType and ReduceOp are the ones every layer of ringsync shares (ringsync/dtype.h); this
// header re-exports them and maps C++ element types to them, so that
// `client.AllReduce("grad", absl::MakeSpan(floats), ReduceOp::kAvg)` needs no dtype.
//
// float16 and bfloat16 have no C++ type here: pass their uint16_t storage through the
// raw form `Client::AllReduce(name, data, count, DType::kFloat16, op)`.
//
// Thread-safety: everything here is a compile-time constant or a pure function.
#pragma once

#include <cstdint>

#include "ringsync/dtype.h"

namespace ringsync {

// kDTypeOf<T> is the DType of a C++ element type; defined for exactly the types below.
template <typename T>
struct DTypeTraits;  // undefined: T is not an element type the SDK can reduce
// clang-format off
template <> struct DTypeTraits<float> { static constexpr DType kValue = DType::kFloat32; };
template <> struct DTypeTraits<double> { static constexpr DType kValue = DType::kFloat64; };
template <> struct DTypeTraits<int32_t> { static constexpr DType kValue = DType::kInt32; };
template <> struct DTypeTraits<int64_t> { static constexpr DType kValue = DType::kInt64; };
template <> struct DTypeTraits<int8_t> { static constexpr DType kValue = DType::kInt8; };
template <> struct DTypeTraits<uint8_t> { static constexpr DType kValue = DType::kUInt8; };
// clang-format on

// Non-const float, double, int32_t, int64_t, int8_t or uint8_t.
template <typename T>
concept Element = requires {
  DTypeTraits<T>::kValue;
};

template <Element T>
inline constexpr DType kDTypeOf = DTypeTraits<T>::kValue;

}  // namespace ringsync
