// Device-side element arithmetic for the CUDA reducer: how each dtype widens, combines
// and rounds. It must give the same bits as the CPU reducer and the scalar reference
// core/half.h (contract: top of core/reduce/reducer.h). Compiled with --fmad=false,
// --ftz=false and --prec-div=true so every + * / rounds once, IEEE, as written.
//
// Two places where plain CUDA would differ from the CPU, and what we do instead:
//   * Narrowing: cvt.rn.f16.f32 / cvt.rn.bf16.f32 (__float2half_rn,
//     __float2bfloat16_rn) round finite values like half.h but turn every NaN into the
//     canonical 0x7fff. half.h keeps the NaN's sign and payload, so the conversions
//     below are half.h's bit logic, line for line.
//   * NaN results: GPU arithmetic returns the canonical NaN 0x7fffffff. x86 SSE/AVX (the
//     CPU reducer, dst as first operand) returns the first NaN operand made quiet, or the
//     "default NaN" 0xffc00000 (sign set) when an invalid operation such as inf - inf
//     creates one. PatchNan reproduces that. It only runs when the result is NaN, so the
//     common path costs one compare.
//
// Everything here also compiles as plain host C++ (without nvcc), so that
// device_numerics_test checks this exact per-element code against the CPU reducer on
// machines without a GPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define RINGSYNC_HD __host__ __device__ __forceinline__
// For the rare NaN paths: a call there keeps the hot loop small (one inlined copy per
// vector lane would multiply the kernel's code size several times).
#define RINGSYNC_HD_COLD __host__ __device__ __noinline__
#else
#define RINGSYNC_HD inline
#define RINGSYNC_HD_COLD inline
#endif

namespace ringsync::cuda {

// ---- bit casts that work on both sides ---------------------------------------------

RINGSYNC_HD uint32_t BitsOf(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}
RINGSYNC_HD float FloatOf(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}
RINGSYNC_HD uint64_t BitsOf(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}
RINGSYNC_HD double DoubleOf(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// ---- NaN handling, x86 style ------------------------------------------------------

RINGSYNC_HD bool IsNan(float x) { return x != x; }
RINGSYNC_HD bool IsNan(double x) { return x != x; }
RINGSYNC_HD float Quiet(float x) { return FloatOf(BitsOf(x) | 0x00400000u); }
RINGSYNC_HD double Quiet(double x) { return DoubleOf(BitsOf(x) | 0x0008000000000000ull); }
RINGSYNC_HD float DefaultNan(float) { return FloatOf(0xffc00000u); }
RINGSYNC_HD double DefaultNan(double) { return DoubleOf(0xfff8000000000000ull); }

// r was computed from a (the dst / first operand) and b.
template <typename W>
RINGSYNC_HD W PatchNan(W r, W a, W b) {
  if (!IsNan(r)) return r;
  if (IsNan(a)) return Quiet(a);
  if (IsNan(b)) return Quiet(b);
  return DefaultNan(r);
}

// ---- float16 / bfloat16 <-> float32, bit for bit as core/half.h -----------------
// A copy, because half.h's functions are host-only; device_numerics_test compares the
// two for every 16-bit input and a sweep of floats, so they cannot drift apart.

RINGSYNC_HD float BFloat16ToFloat(uint16_t h) {
  return FloatOf(uint32_t{h} << 16);
}

RINGSYNC_HD uint16_t FloatToBFloat16(float f) {
  uint32_t bits = BitsOf(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

RINGSYNC_HD float Float16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    // Inf keeps its bits; a NaN is made quiet (as F16C's vcvtph2ps and half.h do).
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return FloatOf(sign | 0x7f800000u | (mantissa << 13) | quiet);
  }
  if (exponent != 0) return FloatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return FloatOf(sign);
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact
  return sign ? -magnitude : magnitude;
}

RINGSYNC_HD uint16_t FloatToFloat16(float f) {
  const uint32_t bits = BitsOf(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;
  if (abs < 0x38800000u) {
    // rintf rounds to nearest even, like the reference's nearbyintf in the default mode.
    const float scaled = FloatOf(abs) * 0x1p24f;
    return sign | static_cast<uint16_t>(static_cast<uint32_t>(rintf(scaled)));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

// ---- element types ----------------------------------------------------------------
// Storage: the bits in memory. Wide: the type arithmetic happens in.
// Widen/Narrow: exact for every input, NaN bits included (the reference logic above).
// FastWiden/FastNarrow: the same results for every non-NaN value, in one hardware
// instruction on the GPU; callers use them unless a NaN is involved. Integer logic for
// float16 costs some forty instructions per element, which would make a float16
// reduction compute-bound instead of memory-bound.

struct Float32Elem {
  using Storage = float;
  using Wide = float;
  static constexpr bool kFloating = true;
  RINGSYNC_HD static Wide Widen(Storage s) { return s; }
  RINGSYNC_HD static Storage Narrow(Wide w) { return w; }
  RINGSYNC_HD static Wide FastWiden(Storage s) { return s; }
  RINGSYNC_HD static Storage FastNarrow(Wide w) { return w; }
  RINGSYNC_HD static bool IsInf(Storage s) { return (BitsOf(s) & 0x7fffffffu) == 0x7f800000u; }
};

struct Float64Elem {
  using Storage = double;
  using Wide = double;
  static constexpr bool kFloating = true;
  RINGSYNC_HD static Wide Widen(Storage s) { return s; }
  RINGSYNC_HD static Storage Narrow(Wide w) { return w; }
  RINGSYNC_HD static Wide FastWiden(Storage s) { return s; }
  RINGSYNC_HD static Storage FastNarrow(Wide w) { return w; }
  RINGSYNC_HD static bool IsInf(Storage s) {
    return (BitsOf(s) & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
  }
};

struct Float16Elem {
  using Storage = uint16_t;
  using Wide = float;
  static constexpr bool kFloating = true;
  RINGSYNC_HD static Wide Widen(Storage s) { return Float16ToFloat(s); }
  RINGSYNC_HD static Storage Narrow(Wide w) { return FloatToFloat16(w); }
  // cvt.f32.f16 is exact; cvt.rn.f16.f32 rounds to nearest even, keeps subnormals
  // (no .ftz) and overflows to inf from 65520 up, exactly as FloatToFloat16.
  RINGSYNC_HD static Wide FastWiden(Storage s) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
#else
    return Widen(s);
#endif
  }
  RINGSYNC_HD static Storage FastNarrow(Wide w) {
#if defined(__CUDA_ARCH__)
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(w));
    return h;
#else
    return Narrow(w);
#endif
  }
  RINGSYNC_HD static bool IsInf(Storage s) { return (s & 0x7fffu) == 0x7c00u; }
};

struct BFloat16Elem {
  using Storage = uint16_t;
  using Wide = float;
  static constexpr bool kFloating = true;
  RINGSYNC_HD static Wide Widen(Storage s) { return BFloat16ToFloat(s); }
  RINGSYNC_HD static Storage Narrow(Wide w) { return FloatToBFloat16(w); }
  // Already a few integer operations; FastNarrow only drops the NaN test.
  RINGSYNC_HD static Wide FastWiden(Storage s) { return BFloat16ToFloat(s); }
  RINGSYNC_HD static Storage FastNarrow(Wide w) {
    const uint32_t bits = BitsOf(w);
    return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
  RINGSYNC_HD static bool IsInf(Storage s) { return (s & 0x7fffu) == 0x7f80u; }
};

template <typename Int>
struct IntElem {
  using Storage = Int;
  using Wide = Int;
  static constexpr bool kFloating = false;
  RINGSYNC_HD static Wide Widen(Storage s) { return s; }
  RINGSYNC_HD static Storage Narrow(Wide w) { return w; }
  RINGSYNC_HD static Wide FastWiden(Storage s) { return s; }
  RINGSYNC_HD static Storage FastNarrow(Wide w) { return w; }
  RINGSYNC_HD static bool IsInf(Storage) { return false; }
};

template <typename W>
RINGSYNC_HD bool IsFinite(W x) {
  return !IsNan(x) && x - x == W{0};  // inf - inf is NaN; keeps to IEEE ops under any flags
}

// ---- combine operators, on wide values --------------------------------------------
// Integers wrap modulo 2^bits: the arithmetic happens in the unsigned type of the same
// width, where overflow is defined.

template <typename W>
using Unsigned = std::make_unsigned_t<W>;

struct SumOp {
  static constexpr bool kCanOverflow = true;
  template <typename W>
  RINGSYNC_HD static W Apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return static_cast<W>(static_cast<Unsigned<W>>(static_cast<Unsigned<W>>(a) + static_cast<Unsigned<W>>(b)));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  static constexpr bool kCanOverflow = true;
  template <typename W>
  RINGSYNC_HD static W Apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      // 8-bit operands promote to int; their product (< 2^16) cannot overflow int.
      return static_cast<W>(static_cast<Unsigned<W>>(static_cast<Unsigned<W>>(a) * static_cast<Unsigned<W>>(b)));
    } else {
      return a * b;
    }
  }
};

// b != b is true only for a NaN b; with it a NaN src wins the select and PatchNan
// then picks the operand the CPU would.
struct MinOp {
  static constexpr bool kCanOverflow = false;
  template <typename W>
  RINGSYNC_HD static W Apply(W a, W b) { return (b < a || b != b) ? b : a; }
};

struct MaxOp {
  static constexpr bool kCanOverflow = false;
  template <typename W>
  RINGSYNC_HD static W Apply(W a, W b) { return (b > a || b != b) ? b : a; }
};

// The exact result of a combine whose fast result was NaN: exact conversions, x86 NaN.
template <typename E, typename Op>
RINGSYNC_HD_COLD typename E::Storage CombineNan(typename E::Storage a, typename E::Storage b) {
  using W = typename E::Wide;
  const W wa = E::Widen(a);
  const W wb = E::Widen(b);
  return E::Narrow(PatchNan(Op::template Apply<W>(wa, wb), wa, wb));
}

// dst = combine(dst, src) for one element; counts finite operands that rounded to inf.
// A NaN result (rare) is recomputed by CombineNan; any other result is the same
// whichever conversions produced it.
template <typename E, typename Op>
RINGSYNC_HD typename E::Storage CombineOne(typename E::Storage a, typename E::Storage b,
                                           unsigned& overflows) {
  using W = typename E::Wide;
  if constexpr (!E::kFloating) {
    return Op::template Apply<W>(a, b);
  } else {
    const W fa = E::FastWiden(a);
    const W fb = E::FastWiden(b);
    const W r = Op::template Apply<W>(fa, fb);
    const typename E::Storage out = IsNan(r) ? CombineNan<E, Op>(a, b) : E::FastNarrow(r);
    if constexpr (Op::kCanOverflow) {
      if (E::IsInf(out)) overflows += IsFinite(fa) && IsFinite(fb);
    }
    return out;
  }
}

// ---- scale (PreScale / Finalize), per element --------------------------------------

// ScaleArgs converted once on the host to the element's wide type, so every element
// uses the same rounded factor the CPU reducer uses.
template <typename W>
struct WideScale {
  bool divide;
  bool multiply;
  W divisor;           // floating types
  long long idivisor;  // integer types: C++ '/' truncates toward zero
  W factor;
};

// The exact result of a scale whose fast result was NaN.
template <typename E>
RINGSYNC_HD_COLD typename E::Storage ScaleNan(typename E::Storage s,
                                              const WideScale<typename E::Wide>& p) {
  typename E::Wide r = E::Widen(s);
  if (p.divide) r = PatchNan(r / p.divisor, r, p.divisor);
  if (p.multiply) r = PatchNan(r * p.factor, r, p.factor);
  return E::Narrow(r);
}

template <typename E>
RINGSYNC_HD typename E::Storage ScaleOne(typename E::Storage s,
                                         const WideScale<typename E::Wide>& p,
                                         unsigned& overflows) {
  using W = typename E::Wide;
  if constexpr (E::kFloating) {
    const W x = E::FastWiden(s);
    W r = x;
    if (p.divide) r = r / p.divisor;
    if (p.multiply) r = r * p.factor;
    const typename E::Storage out = IsNan(r) ? ScaleNan<E>(s, p) : E::FastNarrow(r);
    if (E::IsInf(out)) overflows += IsFinite(x);
    return out;
  } else {
    // Integer AVG: the wrapped sum divided by world_size; the quotient's magnitude never
    // exceeds the dividend's, so it fits the element type.
    return p.divide ? static_cast<W>(static_cast<long long>(s) / p.idivisor) : s;
  }
}

}  // namespace ringsync::cuda
