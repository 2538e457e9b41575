// AVX2 + F16C kernels, chosen at run time by Avx2Kernels() (bottom of this file).
//
// Why a target pragma and not -mavx2 on this file: shipped binaries must run on any
// x86-64. With a file-wide flag, inline functions from shared headers (std::, absl,
// cpu_kernels.h) would be emitted here with AVX2 instructions, and the linker may
// keep that copy for every caller. The pragma applies to the functions defined
// between push and pop only, and none of them runs before the CPU check passed.
//
// Each lane does the same IEEE operations in the same order as the scalar loops in
// cpu_kernels.h, which also finish every tail and redo every block that holds an
// infinity or NaN (simd_loops.inc), so the results are bitwise identical:
//  * float16: vcvtph2ps is exact; vcvtps2ph with the round-to-nearest-even immediate
//    equals FloatToFloat16 for all 2^32 floats (checked when half.h was reviewed).
//  * bfloat16: widening is a 16-bit shift; narrowing is FloatToBFloat16's integer
//    rounding. Not vcvtneps2bf16 (AVX512-BF16): it flushes subnormals to zero.
//  * No FMA: each multiply, add and divide is its own intrinsic and rounds; the target
//    list leaves "fma" out, so the compiler cannot contract either.
//  * MIN/MAX: vminps(b, a) is (b < a ? b : a), the contract; lanes holding a NaN take
//    a + b instead, as Min/Max in cpu_kernels.h do.
#include "core/reduce/cpu_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#include <limits>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c,popcnt")
#endif

namespace ringsync::cpu_kernels {
namespace {

// ---- Arithmetic shared by the float32-lane types (float32, float16, bfloat16). ----
struct Float32Math {
  using V = __m256;
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Min(V a, V b) { return FixNan(a, b, _mm256_min_ps(b, a)); }  // b < a ? b : a
  static V Max(V a, V b) { return FixNan(a, b, _mm256_max_ps(b, a)); }  // b > a ? b : a
  static V Splat(double x) { return _mm256_set1_ps(static_cast<float>(x)); }
  static V FixNan(V a, V b, V r) {
    return _mm256_blendv_ps(r, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
};

// Whether some 32-bit lane of the n pairs has magnitude bits above `finite_max`.
// Integer order on float magnitude bits is float order, with NaN above infinity.
// (No lambdas in this region: GCC does not give them the target pragma.)
inline __m256i MagnitudeBits(__m256 v) {
  return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
}
template <size_t n, class P>
bool AnyMagnitudeAbove(const P* pairs, int32_t finite_max) {
  __m256i top = _mm256_max_epi32(MagnitudeBits(pairs[0].v0), MagnitudeBits(pairs[0].v1));
#pragma GCC unroll 4
  for (size_t k = 1; k < n; ++k) {
    top = _mm256_max_epi32(
        top, _mm256_max_epi32(MagnitudeBits(pairs[k].v0), MagnitudeBits(pairs[k].v1)));
  }
  const __m256i hit = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(finite_max));
  return !_mm256_testz_si256(hit, hit);
}

// Same for the 16-bit elements of n narrowed vectors.
template <size_t n>
bool Any16Above(const __m256i* w, int16_t finite_max) {
  const __m256i magnitude = _mm256_set1_epi16(0x7fff);
  __m256i top = _mm256_and_si256(w[0], magnitude);
#pragma GCC unroll 4
  for (size_t k = 1; k < n; ++k) top = _mm256_max_epi16(top, _mm256_and_si256(w[k], magnitude));
  const __m256i hit = _mm256_cmpgt_epi16(top, _mm256_set1_epi16(finite_max));
  return !_mm256_testz_si256(hit, hit);
}

// ---- Lanes types (interface in simd_loops.inc). ----
struct Float32Lanes : Float32Math {
  static constexpr DType kDType = DType::kFloat32;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kBlockPairs = 2;  // more spills registers
  struct Narrowed {
    V v0, v1;
  };
  static void Load2(const char* p, V& v0, V& v1) {
    v0 = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    v1 = _mm256_loadu_ps(reinterpret_cast<const float*>(p + 32));
  }
  static Narrowed Narrow(V v0, V v1) { return {v0, v1}; }
  static void Store(char* p, const Narrowed& n) {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), n.v0);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + 32), n.v1);
  }
  template <size_t n>
  static bool AnyInfOrNan(const Narrowed* x) {
    return AnyMagnitudeAbove<n>(x, 0x7f7fffff);  // FLT_MAX
  }
};

struct Float64Lanes {
  static constexpr DType kDType = DType::kFloat64;
  static constexpr size_t kLanes = 4;
  static constexpr size_t kBlockPairs = 2;
  using V = __m256d;
  struct Narrowed {
    V v0, v1;
  };
  static V Add(V a, V b) { return _mm256_add_pd(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V Div(V a, V b) { return _mm256_div_pd(a, b); }
  static V Min(V a, V b) { return FixNan(a, b, _mm256_min_pd(b, a)); }
  static V Max(V a, V b) { return FixNan(a, b, _mm256_max_pd(b, a)); }
  static V Splat(double x) { return _mm256_set1_pd(x); }
  static V FixNan(V a, V b, V r) {
    return _mm256_blendv_pd(r, _mm256_add_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
  static void Load2(const char* p, V& v0, V& v1) {
    v0 = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    v1 = _mm256_loadu_pd(reinterpret_cast<const double*>(p + 32));
  }
  static Narrowed Narrow(V v0, V v1) { return {v0, v1}; }
  static void Store(char* p, const Narrowed& n) {
    _mm256_storeu_pd(reinterpret_cast<double*>(p), n.v0);
    _mm256_storeu_pd(reinterpret_cast<double*>(p + 32), n.v1);
  }
  template <size_t n>
  static bool AnyInfOrNan(const Narrowed* x) {
    // |x| < inf is false for +-inf and NaN alike.
    const V inf = _mm256_set1_pd(std::numeric_limits<double>::infinity());
    const V sign = _mm256_set1_pd(-0.0);
    V finite = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
#pragma GCC unroll 4
    for (size_t k = 0; k < n; ++k) {
      finite =
          _mm256_and_pd(finite, _mm256_cmp_pd(_mm256_andnot_pd(sign, x[k].v0), inf, _CMP_LT_OQ));
      finite =
          _mm256_and_pd(finite, _mm256_cmp_pd(_mm256_andnot_pd(sign, x[k].v1), inf, _CMP_LT_OQ));
    }
    return _mm256_movemask_pd(finite) != 0xf;
  }
};

struct Float16Lanes : Float32Math {
  static constexpr DType kDType = DType::kFloat16;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kBlockPairs = 4;
  using Narrowed = __m256i;
  static void Load2(const char* p, V& v0, V& v1) {
    v0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    v1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
  static Narrowed Narrow(V v0, V v1) {
    return _mm256_set_m128i(_mm256_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT),
                            _mm256_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT));
  }
  static void Store(char* p, Narrowed n) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), n); }
  template <size_t n>
  static bool AnyInfOrNan(const Narrowed* x) {
    return Any16Above<n>(x, 0x7bff);
  }
};

// bfloat16 is the top half of a float32. A pair splits 16 elements by parity: v0 holds
// the even ones (shifted up), v1 the odd ones (already in the top half), so loading
// and storing need no shuffles, only a shift, a mask and a 16-bit blend.
struct BFloat16Lanes : Float32Math {
  static constexpr DType kDType = DType::kBFloat16;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kBlockPairs = 4;
  using Narrowed = __m256i;
  static void Load2(const char* p, V& even, V& odd) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    odd = _mm256_castsi256_ps(
        _mm256_and_si256(raw, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  // FloatToBFloat16: add 0x7fff, plus 1 when the lowest kept bit is set (ties to even).
  // Compare-and-subtract instead of shift-and-add spares the shift units, this
  // kernel's bottleneck. FloatToBFloat16's NaN rule is not needed: a NaN here comes
  // from x86 arithmetic on bfloat16 values, so it is the default NaN or an operand's
  // NaN made quiet, with 16 zero low bits either way, and this rounding keeps its top
  // half exactly as FloatToBFloat16 does (the sweeps feed it random NaN payloads).
  static __m256i RoundBits(V v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lowest_kept = _mm256_set1_epi32(0x10000);
    const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(bits, lowest_kept), lowest_kept);
    return _mm256_sub_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd);
  }
  static Narrowed Narrow(V even, V odd) {  // top halves, back in element order
    return _mm256_blend_epi16(_mm256_srli_epi32(RoundBits(even), 16), RoundBits(odd), 0xaa);
  }
  static void Store(char* p, Narrowed n) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), n); }
  template <size_t n>
  static bool AnyInfOrNan(const Narrowed* x) {
    return Any16Above<n>(x, 0x7f7f);
  }
};

#include "core/reduce/simd_loops.inc"

// ---- Integers: wrapping SUM and exact MIN/MAX; PROD and AVG's division stay portable
// where AVX2 has no instruction (8- and 64-bit multiply, integer divide). ----
template <DType D, class ScalarOp, __m256i (*kApply)(__m256i, __m256i)>
uint64_t CombineIntVec(void* dst_v, const void* src_v, size_t count) {
  constexpr size_t kLanes = 32 / sizeof(typename Elem<D>::T);
  char* dst = static_cast<char*>(dst_v);
  const char* src = static_cast<const char*>(src_v);
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes, dst += 32, src += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), kApply(a, b));
  }
  return CombineLoop<D, ScalarOp>(dst, src, count - i);
}

__m256i AddI32(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
__m256i MulI32(__m256i a, __m256i b) { return _mm256_mullo_epi32(a, b); }
__m256i MinI32(__m256i a, __m256i b) { return _mm256_min_epi32(a, b); }
__m256i MaxI32(__m256i a, __m256i b) { return _mm256_max_epi32(a, b); }
__m256i AddI64(__m256i a, __m256i b) { return _mm256_add_epi64(a, b); }
__m256i MinI64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
__m256i MaxI64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }
__m256i AddI8(__m256i a, __m256i b) { return _mm256_add_epi8(a, b); }
__m256i MinI8(__m256i a, __m256i b) { return _mm256_min_epi8(a, b); }
__m256i MaxI8(__m256i a, __m256i b) { return _mm256_max_epi8(a, b); }
__m256i MinU8(__m256i a, __m256i b) { return _mm256_min_epu8(a, b); }
__m256i MaxU8(__m256i a, __m256i b) { return _mm256_max_epu8(a, b); }

template <DType D, ReduceOp kOp, class ScalarOp, __m256i (*kApply)(__m256i, __m256i)>
void SetInt(KernelTable& t) {
  t.combine[static_cast<size_t>(D)][static_cast<size_t>(kOp)] = &CombineIntVec<D, ScalarOp, kApply>;
}

template <DType D, __m256i (*kAdd)(__m256i, __m256i), __m256i (*kMin)(__m256i, __m256i),
          __m256i (*kMax)(__m256i, __m256i)>
void SetIntSumMinMax(KernelTable& t) {
  SetInt<D, ReduceOp::kSum, Sum, kAdd>(t);
  SetInt<D, ReduceOp::kAvg, Sum, kAdd>(t);
  SetInt<D, ReduceOp::kMin, Min, kMin>(t);
  SetInt<D, ReduceOp::kMax, Max, kMax>(t);
}

// Runs only after the CPU check: it is compiled for AVX2 like everything above.
void OverrideWithAvx2(KernelTable& t) {
  t.isa = "avx2";
  SetFloatKernels<Float32Lanes>(t);
  SetFloatKernels<Float64Lanes>(t);
  SetFloatKernels<Float16Lanes>(t);
  SetFloatKernels<BFloat16Lanes>(t);
  SetIntSumMinMax<DType::kInt32, AddI32, MinI32, MaxI32>(t);
  SetInt<DType::kInt32, ReduceOp::kProd, Prod, MulI32>(t);
  SetIntSumMinMax<DType::kInt64, AddI64, MinI64, MaxI64>(t);
  SetIntSumMinMax<DType::kInt8, AddI8, MinI8, MaxI8>(t);
  SetIntSumMinMax<DType::kUInt8, AddI8, MinU8, MaxU8>(t);
}

}  // namespace
}  // namespace ringsync::cpu_kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace ringsync::cpu_kernels {
namespace {

// clang 14's __builtin_cpu_supports does not know "f16c" (a compile error in the fuzz
// build): CPUID leaf 1 says it, for either compiler.
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

}  // namespace

const KernelTable* Avx2Kernels() {
  static const KernelTable* const table = []() -> const KernelTable* {
    __builtin_cpu_init();  // we may run before libgcc's constructor has
    if (!__builtin_cpu_supports("avx2") || !HasF16c() ||
        !__builtin_cpu_supports("popcnt")) {
      return nullptr;
    }
    static KernelTable avx2 = PortableKernels();
    OverrideWithAvx2(avx2);
    return &avx2;
  }();
  return table;
}

}  // namespace ringsync::cpu_kernels

#else  // not x86-64 with GCC/Clang: the portable table is all there is.

namespace ringsync::cpu_kernels {
const KernelTable* Avx2Kernels() { return nullptr; }
}  // namespace ringsync::cpu_kernels

#endif
