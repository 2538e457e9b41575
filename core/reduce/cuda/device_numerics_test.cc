// The CUDA kernels' per-element code (device_numerics.cuh), compiled for the host and
// checked bit for bit against the CPU reducer's scalar loops (cpu_kernels.h) and the
// half.h reference. Needs no GPU: it runs in every build that has the CUDA reducer.
//
// What it cannot see is GPU hardware NaN behaviour; PatchNanTest feeds PatchNan the
// canonical NaN a GPU produces and expects the NaN x86 produces.
#include "core/reduce/cuda/device_numerics.cuh"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/half.h"
#include "core/reduce/cpu_kernels.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(HalfConversionTest, WideningMatchesReferenceForEveryInput) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(cuda::Float16ToFloat(bits)),
              std::bit_cast<uint32_t>(Float16ToFloat(bits))) << std::hex << h;
    ASSERT_EQ(std::bit_cast<uint32_t>(cuda::BFloat16ToFloat(bits)),
              std::bit_cast<uint32_t>(BFloat16ToFloat(bits))) << std::hex << h;
  }
}

void ExpectNarrowingMatches(float f) {
  ASSERT_EQ(cuda::FloatToFloat16(f), FloatToFloat16(f)) << std::hex << std::bit_cast<uint32_t>(f);
  ASSERT_EQ(cuda::FloatToBFloat16(f), FloatToBFloat16(f)) << std::hex << std::bit_cast<uint32_t>(f);
}

TEST(HalfConversionTest, NarrowingMatchesReferenceOnASweepAndEveryTie) {
  // A stride through all 2^32 float bit patterns (NaN payloads, subnormals, both signs).
  for (uint64_t u = 0; u <= 0xffffffffu; u += 251) ExpectNarrowingMatches(std::bit_cast<float>(static_cast<uint32_t>(u)));
  // Around every half / bfloat16 value and exactly on each midpoint (ties to even).
  for (uint32_t h = 0; h < 0xffff; ++h) {
    for (const auto widen : {+[](uint16_t x) { return Float16ToFloat(x); },
                             +[](uint16_t x) { return BFloat16ToFloat(x); }}) {
      const float lo = widen(static_cast<uint16_t>(h)), hi = widen(static_cast<uint16_t>(h + 1));
      const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
      for (const float f : {lo, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) {
        ExpectNarrowingMatches(f);
      }
    }
  }
}

// Random storage bits, with ordinary values and specials mixed in for the wide types.
template <typename T>
std::vector<T> Nasty(size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> out(count);
  for (T& x : out) {
    uint64_t bits = rng();
    if constexpr (std::is_same_v<T, float>) {
      if (rng() % 2) bits = std::bit_cast<uint32_t>(std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng));
      if (rng() % 16 == 0) bits = std::bit_cast<uint32_t>(rng() % 2 ? INFINITY : 3.4e38f) ^ ((rng() & 1) << 31);
    } else if constexpr (std::is_same_v<T, double>) {
      if (rng() % 2) bits = std::bit_cast<uint64_t>(std::uniform_real_distribution<double>(-1e3, 1e3)(rng));
      if (rng() % 16 == 0) bits = std::bit_cast<uint64_t>(rng() % 2 ? INFINITY : 1.7e308) ^ ((rng() & 1) << 63);
    } else if constexpr (sizeof(T) == 2) {
      if (rng() % 2) bits = 0x3c00 + rng() % 1024;  // near 1: sums need rounding
    }
    std::memcpy(&x, &bits, sizeof(T));
  }
  return out;
}

template <typename T>
std::string Hex(T x) {
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  return absl::StrFormat("0x%0*x", 2 * sizeof(T), bits);
}

// When both operands are NaN the CPU reducer's choice between them is the compiler's
// (gcc commutes `a + b` in some instantiations), so any NaN is accepted there; every
// other result must match bit for bit.
template <typename E>
bool BothNan(typename E::Storage a, typename E::Storage b) {
  if constexpr (!E::kFloating) {
    return false;
  } else {
    return std::isnan(E::Widen(a)) && std::isnan(E::Widen(b));
  }
}

template <DType D, typename E, typename CpuOp, typename GpuOp>
void ExpectCombineMatches() {
  using T = typename E::Storage;
  static_assert(std::is_same_v<T, typename cpu_kernels::Elem<D>::T>);
  constexpr size_t kCount = 50000;
  const std::vector<T> a = Nasty<T>(kCount, 1), b = Nasty<T>(kCount, 2);
  std::vector<T> want(a);
  const uint64_t want_overflows = cpu_kernels::CombineLoop<D, CpuOp>(want.data(), b.data(), kCount);
  unsigned got_overflows = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const T got = cuda::CombineOne<E, GpuOp>(a[i], b[i], got_overflows);
    if (BothNan<E>(a[i], b[i])) {
      ASSERT_TRUE(std::isnan(E::Widen(got)) && std::isnan(E::Widen(want[i]))) << i;
      continue;
    }
    ASSERT_EQ(std::memcmp(&got, &want[i], sizeof(T)), 0)
        << DTypeName(D) << " " << typeid(GpuOp).name() << " element " << i << ": a " << Hex(a[i])
        << " b " << Hex(b[i]) << " -> cpu " << Hex(want[i]) << ", cuda " << Hex(got);
  }
  EXPECT_EQ(got_overflows, want_overflows) << DTypeName(D) << " " << typeid(GpuOp).name();
}

template <DType D, typename E>
void ExpectEveryOpMatches() {
  ExpectCombineMatches<D, E, cpu_kernels::Sum, cuda::SumOp>();
  ExpectCombineMatches<D, E, cpu_kernels::Prod, cuda::ProdOp>();
  ExpectCombineMatches<D, E, cpu_kernels::Min, cuda::MinOp>();
  ExpectCombineMatches<D, E, cpu_kernels::Max, cuda::MaxOp>();
}

TEST(CombineOneTest, MatchesCpuScalarLoopsForEveryDTypeAndOp) {
  ExpectEveryOpMatches<DType::kFloat32, cuda::Float32Elem>();
  ExpectEveryOpMatches<DType::kFloat64, cuda::Float64Elem>();
  ExpectEveryOpMatches<DType::kFloat16, cuda::Float16Elem>();
  ExpectEveryOpMatches<DType::kBFloat16, cuda::BFloat16Elem>();
  ExpectEveryOpMatches<DType::kInt32, cuda::IntElem<int32_t>>();
  ExpectEveryOpMatches<DType::kInt64, cuda::IntElem<int64_t>>();
  ExpectEveryOpMatches<DType::kInt8, cuda::IntElem<int8_t>>();
  ExpectEveryOpMatches<DType::kUInt8, cuda::IntElem<uint8_t>>();
}

// Same arguments the CUDA reducer derives from a ReduceSpec (cuda_reducer.cc:
// FinalizeArgs / PreScaleArgs): divide only when the divisor is not 1, and once the
// kernel runs, floating types always multiply.
template <DType D, typename E>
void ExpectScaleMatches(int divisor, double scale) {
  using T = typename E::Storage;
  using W = typename E::Wide;
  constexpr size_t kCount = 20000;
  const std::vector<T> x = Nasty<T>(kCount, 3 + divisor);
  std::vector<T> want(x);
  const uint64_t want_overflows = cpu_kernels::ScaleLoop<D>(want.data(), kCount, divisor, scale);
  const cuda::WideScale<W> p{.divide = divisor != 1,
                             .multiply = E::kFloating,
                             .divisor = static_cast<W>(divisor),
                             .idivisor = divisor,
                             .factor = static_cast<W>(scale)};
  unsigned got_overflows = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const T got = cuda::ScaleOne<E>(x[i], p, got_overflows);
    ASSERT_EQ(std::memcmp(&got, &want[i], sizeof(T)), 0)
        << DTypeName(D) << " element " << i << " divisor " << divisor << " scale " << scale;
  }
  EXPECT_EQ(got_overflows, want_overflows) << DTypeName(D) << " scale " << scale;
}

template <DType D, typename E>
void ExpectEveryScaleMatches() {
  for (const int divisor : {1, 3, 8}) {
    if constexpr (E::kFloating) {
      for (const double scale : {1.0, 0.5, 3.0, 0.1, 1e-3, 1e30, 0.0}) ExpectScaleMatches<D, E>(divisor, scale);
    } else {
      ExpectScaleMatches<D, E>(divisor, 1.0);
    }
  }
}

TEST(ScaleOneTest, MatchesCpuScaleLoopForEveryDType) {
  ExpectEveryScaleMatches<DType::kFloat32, cuda::Float32Elem>();
  ExpectEveryScaleMatches<DType::kFloat64, cuda::Float64Elem>();
  ExpectEveryScaleMatches<DType::kFloat16, cuda::Float16Elem>();
  ExpectEveryScaleMatches<DType::kBFloat16, cuda::BFloat16Elem>();
  ExpectEveryScaleMatches<DType::kInt32, cuda::IntElem<int32_t>>();
  ExpectEveryScaleMatches<DType::kInt64, cuda::IntElem<int64_t>>();
  ExpectEveryScaleMatches<DType::kInt8, cuda::IntElem<int8_t>>();
  ExpectEveryScaleMatches<DType::kUInt8, cuda::IntElem<uint8_t>>();
}

#if defined(__x86_64__) && defined(__GNUC__)
// x86 arithmetic with dst as the first operand, fixed by assembly so the compiler
// cannot commute it: what the CPU reducer's vaddps/vmulps/vdivps(dst, src) return.
float X86(char op, float a, float b) {
  if (op == '+') asm("addss %1, %0" : "+x"(a) : "x"(b));
  if (op == '*') asm("mulss %1, %0" : "+x"(a) : "x"(b));
  if (op == '/') asm("divss %1, %0" : "+x"(a) : "x"(b));
  return a;
}
double X86(char op, double a, double b) {
  if (op == '+') asm("addsd %1, %0" : "+x"(a) : "x"(b));
  if (op == '*') asm("mulsd %1, %0" : "+x"(a) : "x"(b));
  if (op == '/') asm("divsd %1, %0" : "+x"(a) : "x"(b));
  return a;
}

template <typename W, typename Bits>
void ExpectPatchNanGivesX86(const std::vector<Bits>& specials, Bits gpu_canonical_nan) {
  for (const Bits ab : specials) {
    for (const Bits bb : specials) {
      const W a = std::bit_cast<W>(ab), b = std::bit_cast<W>(bb);
      for (const char op : {'+', '*', '/'}) {
        const W x86 = X86(op, a, b);
        // What the GPU computes: the right value, except every NaN is canonical.
        const W gpu = std::isnan(x86) ? std::bit_cast<W>(gpu_canonical_nan) : x86;
        EXPECT_EQ(std::bit_cast<Bits>(cuda::PatchNan(gpu, a, b)), std::bit_cast<Bits>(x86))
            << std::hex << ab << " " << op << " " << bb;
      }
    }
  }
}

TEST(PatchNanTest, TurnsGpuCanonicalNanIntoX86Nan) {
  ExpectPatchNanGivesX86<float, uint32_t>(
      {0x00000000u, 0x80000000u, 0x3f800000u, 0xc0200000u, 0x7f800000u, 0xff800000u,
       0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffe00001u, 0x7f800001u, 0xff912345u,
       0x7f7fffffu, 0x00000001u},
      0x7fffffffu);
  ExpectPatchNanGivesX86<double, uint64_t>(
      {0x0ull, 0x8000000000000000ull, 0x3ff0000000000000ull, 0x7ff0000000000000ull,
       0xfff0000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000001ull,
       0x7ff0000000000001ull, 0xfff4000000001234ull, 0x7fefffffffffffffull},
      0x7fffffffffffffffull);
}
#endif

}  // namespace
}  // namespace ringsync
