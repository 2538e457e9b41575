// core/half.h is the bit-exact reference every reducer's float16/bfloat16 arithmetic
// must match, so it is checked here against definitions that share none of its code:
// exact values built with ldexp, and nearest-even rounding found by comparing
// distances in double.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/half.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

bool Float16IsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool BFloat16IsNan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

// The value a float16 bit pattern denotes, from the IEEE 754 binary16 definition.
double Float16Value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Nearest float16 to x by brute force, ties to the even bit pattern; |x| >= 65520
// (the midpoint between 65504 and 2^16) overflows to infinity.
uint16_t NearestFloat16(float x) {
  static const std::vector<double> kFinite = [] {
    std::vector<double> v;
    for (uint16_t h = 0; h <= 0x7bff; ++h) v.push_back(Float16Value(h));
    return v;
  }();
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;
  const auto hi = std::upper_bound(kFinite.begin(), kFinite.end(), a);
  const auto lo = hi - 1;
  const uint16_t lo_bits = static_cast<uint16_t>(lo - kFinite.begin());
  if (hi == kFinite.end()) return sign | lo_bits;
  const double below = a - *lo, above = *hi - a;
  const bool up = above < below || (above == below && (lo_bits & 1));
  return sign | static_cast<uint16_t>(lo_bits + up);
}

// Nearest bfloat16 to x: the two candidates bracket |x|; the one past the largest
// finite value is infinity, which rounding treats as 2^128.
uint16_t NearestBFloat16(float x) {
  const uint32_t abs_bits = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const uint16_t lo_bits = static_cast<uint16_t>(abs_bits >> 16);
  if (lo_bits == 0x7f80) return sign | lo_bits;  // infinity
  const double a = std::fabs(static_cast<double>(x));
  const double lo = std::bit_cast<float>(uint32_t{lo_bits} << 16);
  const double hi =
      lo_bits == 0x7f7f ? std::ldexp(1.0, 128) : std::bit_cast<float>(uint32_t{lo_bits + 1u} << 16);
  const double below = a - lo, above = hi - a;
  const bool up = above < below || (above == below && (lo_bits & 1));
  return sign | static_cast<uint16_t>(lo_bits + up);
}

// Floats where rounding mistakes live: every midpoint between neighbouring halves or
// bfloat16s and the floats either side of it, plus an even sweep of all bit patterns.
std::vector<float> InterestingFloats(bool bfloat16) {
  std::vector<float> out;
  const uint32_t last = bfloat16 ? 0x7f7f : 0x7bff;
  for (uint32_t h = 0; h <= last; ++h) {
    const double lo = bfloat16 ? std::bit_cast<float>(h << 16) : Float16Value(h);
    const double hi = bfloat16
                          ? (h == last ? std::ldexp(1.0, 128) : std::bit_cast<float>((h + 1) << 16))
                          : (h == last ? 65536.0 : Float16Value(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: needs few bits
    for (float f : {std::nextafter(mid, 0.0f), mid, std::nextafter(mid, INFINITY)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!std::isnan(f)) out.push_back(f);
  }
  return out;
}

TEST(Float16Reference, WidensEveryHalfToItsExactValue) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = Float16ToFloat(static_cast<uint16_t>(h));
    if (Float16IsNan(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
      EXPECT_TRUE(std::bit_cast<uint32_t>(f) & 0x00400000u) << "NaN made quiet: " << std::hex << h;
    } else {
      EXPECT_EQ(static_cast<double>(f), Float16Value(static_cast<uint16_t>(h))) << std::hex << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Float16Reference, EveryHalfSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t back = FloatToFloat16(Float16ToFloat(static_cast<uint16_t>(h)));
    if (Float16IsNan(static_cast<uint16_t>(h))) {
      EXPECT_EQ(back, h | 0x0200) << "NaN keeps sign and payload, made quiet: " << std::hex << h;
    } else {
      EXPECT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Float16Reference, NarrowsToNearestEven) {
  // Hand-checked boundaries first, so a failure here reads as a sentence.
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(FloatToFloat16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7c00);  // tie rounds to even: inf
  EXPECT_EQ(FloatToFloat16(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToFloat16(1e6f), 0x7c00);
  EXPECT_EQ(FloatToFloat16(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFloat16(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToFloat16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToFloat16(0x1p-25f), 0x0000);  // tie: to even zero
  EXPECT_EQ(FloatToFloat16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToFloat16(3 * 0x1p-25f), 0x0002);                // tie: to even 2
  EXPECT_EQ(FloatToFloat16(1023.5f * 0x1p-24f), 0x0400);          // tie: up into normals
  EXPECT_EQ(FloatToFloat16(1.0f + 0x1p-11f), 0x3c00);             // tie: down to even
  EXPECT_EQ(FloatToFloat16(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie: up to even
  EXPECT_EQ(FloatToFloat16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above a tie
  const uint16_t nan = FloatToFloat16(-std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(Float16IsNan(nan));
  EXPECT_TRUE(nan & 0x8000);
  EXPECT_TRUE(Float16IsNan(FloatToFloat16(std::bit_cast<float>(0x7f800001u))))
      << "a NaN whose payload lives in the dropped bits must not become infinity";

  for (float f : InterestingFloats(/*bfloat16=*/false)) {
    ASSERT_EQ(FloatToFloat16(f), NearestFloat16(f)) << std::hexfloat << f;
  }
}

TEST(BFloat16Reference, EveryValueSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), h << 16) << "widening is exact: " << std::hex << h;
    const uint16_t back = FloatToBFloat16(f);
    EXPECT_EQ(back, BFloat16IsNan(static_cast<uint16_t>(h)) ? (h | 0x0040) : h) << std::hex << h;
  }
}

TEST(BFloat16Reference, NarrowsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3f80);             // tie: down to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie: up to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);  // just above: not truncated
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the top
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBFloat16(std::bit_cast<float>(0x00018000u)), 0x0002) << "subnormals kept";
  EXPECT_TRUE(BFloat16IsNan(FloatToBFloat16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_EQ(FloatToBFloat16(std::bit_cast<float>(0xffc00000u)), 0xffc0);

  for (float f : InterestingFloats(/*bfloat16=*/true)) {
    ASSERT_EQ(FloatToBFloat16(f), NearestBFloat16(f)) << std::hexfloat << f;
  }
}

}  // namespace
}  // namespace ringsync
