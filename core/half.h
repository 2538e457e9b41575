// Scalar float16 / bfloat16 <-> float32 conversions: the reference every reducer
// (CPU SIMD, CUDA) must match bit for bit.
//
// Rounding is IEEE round-to-nearest-even, independent of the FPU rounding mode except
// for float16 subnormal results (nearbyint: the default mode is assumed everywhere).
// Values that round beyond the narrow range become +-inf (float16: |x| >= 65520).
// NaN stays NaN with its sign; narrowing and float16 widening make it quiet (bit-exact
// with F16C), bfloat16 widening is a plain shift that keeps the payload as it is.
// Checked against F16C for all 2^32 floats, and by core/reduce/half_reference_test.cc.
#pragma once

#include <bit>
#include <cstdint>

namespace ringsync {

inline float BFloat16ToFloat(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float Float16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    // Inf keeps its bits; a NaN is made quiet, as F16C's vcvtph2ps does, so the
    // scalar and SIMD paths widen every one of the 65536 halves to the same float.
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13) | quiet);
  }
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: exactly representable as a normal float.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

inline uint16_t FloatToFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: scale so the half ulp (2^-24) becomes 1.0 and let
    // the float adder round to nearest even.
    const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    return sign | static_cast<uint16_t>(static_cast<uint32_t>(__builtin_nearbyintf(scaled)));
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace ringsync
