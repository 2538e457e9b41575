// AVX-512BW bfloat16 kernels, chosen at run time by Avx512Kernels() (bottom of file).
//
// Same scheme as cpu_kernels_avx2.cc (read that first): a target pragma around the
// kernels, the shared loops of simd_loops.inc, the scalar loops for tails and for any
// block holding an infinity or NaN. Only bfloat16 is here: its narrowing is integer
// work that mask registers shorten (one test, one masked add, one masked blend); the
// other dtypes gain nothing from 512-bit registers on the CPUs measured.
#include "core/reduce/cpu_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns inside its own AVX-512 intrinsics (_mm512_undefined_epi32's
// self-initialization, GCC bug 105593); the warning says nothing about this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx2,f16c,popcnt"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx2,f16c,popcnt")
#endif

namespace ringsync::cpu_kernels {
namespace {

// Even elements shifted up in v0, odd ones in place in v1, as BFloat16Lanes in
// cpu_kernels_avx2.cc, 32 elements per pair.
struct BFloat16Lanes512 {
  static constexpr DType kDType = DType::kBFloat16;
  static constexpr size_t kLanes = 16;
  static constexpr size_t kBlockPairs = 2;
  using V = __m512;
  using Narrowed = __m512i;
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Min(V a, V b) { return FixNan(a, b, _mm512_min_ps(b, a)); }  // b < a ? b : a
  static V Max(V a, V b) { return FixNan(a, b, _mm512_max_ps(b, a)); }  // b > a ? b : a
  static V Splat(double x) { return _mm512_set1_ps(static_cast<float>(x)); }
  static V FixNan(V a, V b, V r) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), r, _mm512_add_ps(a, b));
  }
  static void Load2(const char* p, V& even, V& odd) {
    const __m512i raw = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    odd = _mm512_castsi512_ps(
        _mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  // FloatToBFloat16's rounding; see BFloat16Lanes::RoundBits for why NaN needs no step.
  static __m512i RoundBits(V v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __mmask16 odd = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x10000));
    const __m512i up = _mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff));
    return _mm512_mask_add_epi32(up, odd, up, _mm512_set1_epi32(1));
  }
  static Narrowed Narrow(V even, V odd) {  // top halves, back in element order
    return _mm512_mask_blend_epi16(0xaaaaaaaau, _mm512_srli_epi32(RoundBits(even), 16),
                                   RoundBits(odd));
  }
  static void Store(char* p, Narrowed n) { _mm512_storeu_si512(p, n); }
  template <size_t n>
  static bool AnyInfOrNan(const Narrowed* x) {
    __mmask32 hit = 0;
#pragma GCC unroll 4
    for (size_t k = 0; k < n; ++k) {
      hit |= _mm512_cmpgt_epu16_mask(_mm512_and_si512(x[k], _mm512_set1_epi16(0x7fff)),
                                     _mm512_set1_epi16(0x7f7f));
    }
    return hit != 0;
  }
};

#include "core/reduce/simd_loops.inc"

// Runs only after the CPU check: it is compiled for AVX-512 like everything above.
void OverrideWithAvx512(KernelTable& t) {
  t.isa = "avx512";
  SetFloatKernels<BFloat16Lanes512>(t);
}

}  // namespace
}  // namespace ringsync::cpu_kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace ringsync::cpu_kernels {

const KernelTable* Avx512Kernels() {
  static const KernelTable* const table = []() -> const KernelTable* {
    const KernelTable* avx2 = Avx2Kernels();  // also runs __builtin_cpu_init
    if (avx2 == nullptr || !__builtin_cpu_supports("avx512f") ||
        !__builtin_cpu_supports("avx512bw")) {
      return nullptr;
    }
    static KernelTable avx512 = *avx2;
    OverrideWithAvx512(avx512);
    return &avx512;
  }();
  return table;
}

}  // namespace ringsync::cpu_kernels

#else  // not x86-64 with GCC/Clang

namespace ringsync::cpu_kernels {
const KernelTable* Avx512Kernels() { return nullptr; }
}  // namespace ringsync::cpu_kernels

#endif
