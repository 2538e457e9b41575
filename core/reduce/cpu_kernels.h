// Element-wise kernels behind CpuReducer: one table per instruction-set level.
//
// The scalar element operations in this header ARE the CPU numerics of reducer.h.
// The portable table loops over them; the SIMD tables (cpu_kernels_avx2.cc,
// cpu_kernels_avx512.cc, loops in simd_loops.inc) redo the same arithmetic in vector
// registers and hand tails and blocks holding infinities or NaN back to these loops,
// so they can differ only through a bug, which reducer_conformance_test hunts bit by
// bit.
//
// Internal to core/reduce; the ring code sees only the Reducer interface.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ringsync/dtype.h"
#include "core/half.h"

namespace ringsync::cpu_kernels {

// Every kernel returns how many elements overflowed: finite inputs, infinite result.
using CombineFn = uint64_t (*)(void* dst, const void* src, size_t count);
// buf[i] = buf[i] / divisor * scale, computed in the wide type and rounded once;
// the division is skipped when divisor == 1 (x / 1 == x exactly). Integer types only
// divide (truncating toward zero); their scale is always 1.
using ScaleFn = uint64_t (*)(void* buf, size_t count, int divisor, double scale);

// Indexed by the enum values of DType (1..8) and ReduceOp (1..5); slot 0 is unused.
inline constexpr size_t kDTypeSlots = 9;
inline constexpr size_t kOpSlots = 6;

struct KernelTable {
  const char* isa = "portable";
  CombineFn combine[kDTypeSlots][kOpSlots] = {};  // the kAvg column holds SUM
  ScaleFn scale[kDTypeSlots] = {};
};

// Scalar loops over the element operations below, for every dtype and op.
const KernelTable& PortableKernels();
// AVX2 + F16C versions of the hot kernels on top of the portable table, or nullptr
// when this CPU (or this build's target architecture) lacks them.
const KernelTable* Avx2Kernels();
// The AVX2 table with AVX-512BW bfloat16 kernels, or nullptr without AVX-512F/BW.
// Only bfloat16 gains from the wider registers on the CPUs measured: its rounding is
// integer work that AVX-512 masks shorten; float16 is bound by the F16C converts and
// float32/float64 by memory.
const KernelTable* Avx512Kernels();

// ---- Element types: storage type T, the wide type W that arithmetic happens in. ----

template <DType D>
struct Elem;
template <>
struct Elem<DType::kFloat32> {
  using T = float;
  using W = float;
  static W Widen(T x) { return x; }
  static T Narrow(W x) { return x; }
  static bool IsInf(T x) { return std::isinf(x); }
};
template <>
struct Elem<DType::kFloat64> {
  using T = double;
  using W = double;
  static W Widen(T x) { return x; }
  static T Narrow(W x) { return x; }
  static bool IsInf(T x) { return std::isinf(x); }
};
template <>
struct Elem<DType::kFloat16> {
  using T = uint16_t;
  using W = float;
  static W Widen(T x) { return Float16ToFloat(x); }
  static T Narrow(W x) { return FloatToFloat16(x); }
  static bool IsInf(T x) { return (x & 0x7fff) == 0x7c00; }
};
template <>
struct Elem<DType::kBFloat16> {
  using T = uint16_t;
  using W = float;
  static W Widen(T x) { return BFloat16ToFloat(x); }
  static T Narrow(W x) { return FloatToBFloat16(x); }
  static bool IsInf(T x) { return (x & 0x7fff) == 0x7f80; }
};
template <typename Int>
struct IntElem {
  using T = Int;
  using W = Int;
  using U = std::make_unsigned_t<Int>;  // arithmetic that wraps instead of being UB
  static W Widen(T x) { return x; }
  static T Narrow(W x) { return x; }
};
template <>
struct Elem<DType::kInt32> : IntElem<int32_t> {};
template <>
struct Elem<DType::kInt64> : IntElem<int64_t> {};
template <>
struct Elem<DType::kInt8> : IntElem<int8_t> {};
template <>
struct Elem<DType::kUInt8> : IntElem<uint8_t> {};

template <DType D>
inline constexpr bool kIsFloat = std::is_floating_point_v<typename Elem<D>::W>;

// ---- Operators on wide values (a is dst, b is src). ----

struct Sum {
  static constexpr bool kCanOverflow = true;
  template <typename W>
  static W Float(W a, W b) {
    return a + b;
  }
  template <typename U>
  static U Int(U a, U b) {
    return static_cast<U>(a + b);
  }
};
struct Prod {
  static constexpr bool kCanOverflow = true;
  template <typename W>
  static W Float(W a, W b) {
    return a * b;
  }
  template <typename U>
  static U Int(U a, U b) {
    return static_cast<U>(a * b);
  }
};
// IEEE 754-2019 minimum/maximum for NaN (a + b yields a quiet NaN from an operand);
// otherwise the strict comparison keeps dst on ties, so -0/+0 follow dst.
struct Min {
  static constexpr bool kCanOverflow = false;
  template <typename W>
  static W Float(W a, W b) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
    return b < a ? b : a;
  }
  template <typename T>
  static T Int(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  static constexpr bool kCanOverflow = false;
  template <typename W>
  static W Float(W a, W b) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
    return b > a ? b : a;
  }
  template <typename T>
  static T Int(T a, T b) {
    return b > a ? b : a;
  }
};

// Buffers need no alignment: memcpy is how C++ says "load these bytes", and it
// compiles to a plain move.
template <typename T>
inline T LoadAt(const void* base, size_t i) {
  T x;
  std::memcpy(&x, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return x;
}
template <typename T>
inline void StoreAt(void* base, size_t i, T x) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &x, sizeof(T));
}

template <DType D, class Op>
uint64_t CombineLoop(void* dst, const void* src, size_t count) {
  using E = Elem<D>;
  using T = typename E::T;
  uint64_t overflows = 0;
  for (size_t i = 0; i < count; ++i) {
    const T a = LoadAt<T>(dst, i);
    const T b = LoadAt<T>(src, i);
    if constexpr (kIsFloat<D>) {
      const auto wa = E::Widen(a), wb = E::Widen(b);
      const T r = E::Narrow(Op::Float(wa, wb));
      if constexpr (Op::kCanOverflow) {
        overflows += E::IsInf(r) && std::isfinite(wa) && std::isfinite(wb);
      }
      StoreAt<T>(dst, i, r);
    } else if constexpr (Op::kCanOverflow) {  // wrapping integer SUM / PROD
      using U = typename E::U;
      StoreAt<T>(dst, i, static_cast<T>(Op::Int(static_cast<U>(a), static_cast<U>(b))));
    } else {
      StoreAt<T>(dst, i, Op::Int(a, b));
    }
  }
  return overflows;
}

template <DType D>
uint64_t ScaleLoop(void* buf, size_t count, int divisor, double scale) {
  using E = Elem<D>;
  using T = typename E::T;
  using W = typename E::W;
  uint64_t overflows = 0;
  for (size_t i = 0; i < count; ++i) {
    const T x = LoadAt<T>(buf, i);
    if constexpr (kIsFloat<D>) {
      const W wx = E::Widen(x);
      W r = wx;
      if (divisor != 1) r = r / static_cast<W>(divisor);
      r = r * static_cast<W>(scale);
      const T out = E::Narrow(r);
      overflows += E::IsInf(out) && std::isfinite(wx);
      StoreAt<T>(buf, i, out);
    } else {
      // int64 holds every narrower value; world_size >= 1 rules out INT64_MIN / -1.
      StoreAt<T>(buf, i, static_cast<T>(static_cast<int64_t>(x) / divisor));
    }
  }
  return overflows;
}

}  // namespace ringsync::cpu_kernels
