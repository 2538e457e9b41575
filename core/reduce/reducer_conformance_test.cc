// Every reducer against the numerics contract of core/reduce/reducer.h.
//
// Read top to bottom, this file is the contract's executable form:
//   1. ValidateReduceSpec: which specs are refused, and that the message says why.
//   2. A naive reference, one element at a time, written from the contract alone
//      (half.h, itself checked in half_reference_test.cc, for the narrow types).
//   3. Sweeps: every dtype x op x count x alignment, bit for bit against the reference,
//      for Combine, PreScale and Finalize.
//   4. Named cases that pin each rule with hand-picked values.
// Sections 3 and 4 run on every reducer: AvailableReducers() (CPU, CUDA devices) plus
// the CPU reducer's lower kernel levels that this CPU can run (AVX2, portable), which
// is what CPUs without AVX-512 or AVX2 get.
// "Bitwise" means equal bits, except that any NaN matches any NaN: the contract fixes
// NaN-ness, not payloads.
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/reduce/cpu_reducer.h"
#include "core/reduce/reducer.h"
#include "core/reduce/reducer_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync {

// Readable parameters in failure messages ("float16", not "1-byte object <03>").
// Static: found by argument-dependent lookup, private to this file.
static void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }
static void PrintTo(ReduceOp op, std::ostream* os) { *os << ReduceOpName(op); }

namespace {

using ::testing::HasSubstr;

// ============================ 1. ValidateReduceSpec ============================

ReduceSpec Spec(DType dtype, ReduceOp op, int world_size = 1, double pre = 1.0, double post = 1.0) {
  return ReduceSpec{dtype, op, world_size, pre, post};
}

void ExpectRejected(const ReduceSpec& spec, const std::string& names) {
  const absl::Status s = ValidateReduceSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(names));
}

TEST(ValidateReduceSpec, AcceptsEveryDTypeAndOpWithDefaults) {
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) EXPECT_TRUE(ValidateReduceSpec(Spec(d, op, 7)).ok());
  }
  EXPECT_TRUE(ValidateReduceSpec(Spec(DType::kFloat16, ReduceOp::kAvg, 8, 0.125, -3.0)).ok());
  EXPECT_TRUE(ValidateReduceSpec(Spec(DType::kFloat32, ReduceOp::kSum, 1, 0.0, 0.0)).ok())
      << "zero is a finite scale";
}

TEST(ValidateReduceSpec, RejectsInvalidEnums) {
  ExpectRejected(Spec(static_cast<DType>(0), ReduceOp::kSum), "dtype");
  ExpectRejected(Spec(static_cast<DType>(9), ReduceOp::kSum), "dtype");
  ExpectRejected(Spec(DType::kFloat32, static_cast<ReduceOp>(0)), "op");
  ExpectRejected(Spec(DType::kFloat32, static_cast<ReduceOp>(6)), "op");
}

TEST(ValidateReduceSpec, RejectsWorldSizeBelowOne) {
  ExpectRejected(Spec(DType::kFloat32, ReduceOp::kAvg, 0), "world_size");
  ExpectRejected(Spec(DType::kInt32, ReduceOp::kSum, -4), "world_size");
}

TEST(ValidateReduceSpec, RejectsNonFiniteScales) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectRejected(Spec(DType::kFloat32, ReduceOp::kSum, 2, nan), "pre_scale");
  ExpectRejected(Spec(DType::kFloat16, ReduceOp::kSum, 2, inf), "pre_scale");
  ExpectRejected(Spec(DType::kFloat64, ReduceOp::kAvg, 2, 1.0, -inf), "post_scale");
}

TEST(ValidateReduceSpec, RejectsScalesOnIntegerTypes) {
  ExpectRejected(Spec(DType::kInt32, ReduceOp::kSum, 2, 2.0), "pre_scale");
  ExpectRejected(Spec(DType::kInt64, ReduceOp::kAvg, 2, 1.0, 0.5), "post_scale");
  ExpectRejected(Spec(DType::kUInt8, ReduceOp::kMax, 2, 0.0), "uint8");
  EXPECT_TRUE(ValidateReduceSpec(Spec(DType::kInt8, ReduceOp::kAvg, 3, 1.0, 1.0)).ok());
}

// ============================ 2. The naive reference ============================

// Storage type T and the wide type W in which the contract computes.
template <typename Storage, typename Wide, Wide (*kWiden)(Storage), Storage (*kRound)(Wide)>
struct FloatRef {
  using T = Storage;
  using W = Wide;
  static constexpr bool kFloat = true;
  static W Widen(T x) { return kWiden(x); }
  static T Round(W x) { return kRound(x); }
};
template <typename X>
X Same(X x) {
  return x;
}
using RefF32 = FloatRef<float, float, Same<float>, Same<float>>;
using RefF64 = FloatRef<double, double, Same<double>, Same<double>>;
using RefF16 = FloatRef<uint16_t, float, Float16ToFloat, FloatToFloat16>;
using RefBF16 = FloatRef<uint16_t, float, BFloat16ToFloat, FloatToBFloat16>;
template <typename Int>
struct IntRef {
  using T = Int;
  static constexpr bool kFloat = false;
};

// Calls f.template operator()<Ref>() with the reference type of `dtype`.
template <typename F>
void VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f.template operator()<RefF32>();
    case DType::kFloat64:
      return f.template operator()<RefF64>();
    case DType::kFloat16:
      return f.template operator()<RefF16>();
    case DType::kBFloat16:
      return f.template operator()<RefBF16>();
    case DType::kInt32:
      return f.template operator()<IntRef<int32_t>>();
    case DType::kInt64:
      return f.template operator()<IntRef<int64_t>>();
    case DType::kInt8:
      return f.template operator()<IntRef<int8_t>>();
    case DType::kUInt8:
      return f.template operator()<IntRef<uint8_t>>();
  }
}

template <class R>
typename R::T RefCombine(ReduceOp op, typename R::T a, typename R::T b, uint64_t* overflows) {
  using T = typename R::T;
  if constexpr (R::kFloat) {
    using W = typename R::W;
    const W x = R::Widen(a), y = R::Widen(b);
    const bool nan = std::isnan(x) || std::isnan(y);
    W r{};
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        r = x + y;
        break;
      case ReduceOp::kProd:
        r = x * y;
        break;
      case ReduceOp::kMin:
        r = nan ? NAN : (y < x ? y : x);
        break;
      case ReduceOp::kMax:
        r = nan ? NAN : (y > x ? y : x);
        break;
    }
    const T out = R::Round(r);
    *overflows += std::isinf(R::Widen(out)) && std::isfinite(x) && std::isfinite(y);
    return out;
  } else {
    // Wrapping arithmetic: exact modulo 2^64, then keep the low bits.
    const uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return static_cast<T>(x + y);
      case ReduceOp::kProd:
        return static_cast<T>(x * y);
      case ReduceOp::kMin:
        return b < a ? b : a;
      case ReduceOp::kMax:
        return b > a ? b : a;
    }
    return a;
  }
}

// PreScale is RefScale(x, 1, pre_scale); Finalize is RefScale(x, AVG ? world_size : 1,
// post_scale): divide, multiply, round once.
template <class R>
typename R::T RefScale(typename R::T v, int divisor, double scale, uint64_t* overflows) {
  if constexpr (R::kFloat) {
    using W = typename R::W;
    const W x = R::Widen(v);
    const typename R::T out = R::Round(x / static_cast<W>(divisor) * static_cast<W>(scale));
    *overflows += std::isinf(R::Widen(out)) && std::isfinite(x);
    return out;
  } else {
    return static_cast<typename R::T>(static_cast<int64_t>(v) / divisor);  // toward zero
  }
}

// ================================ Test plumbing ================================

struct ReducerUnderTest {
  std::string label;  // test-name suffix: "cpu", "cpu_portable", "cuda_0"
  std::shared_ptr<Reducer> reducer;
};
void PrintTo(const ReducerUnderTest& r, std::ostream* os) { *os << r.label; }

std::vector<ReducerUnderTest> ReducersUnderTest() {
  std::vector<ReducerUnderTest> out;
  for (std::unique_ptr<Reducer>& r : AvailableReducers()) {
    std::string label = r->name();
    for (char& c : label) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    out.push_back({label, std::shared_ptr<Reducer>(std::move(r))});
  }
  // The CPU reducer picks its best kernels; the lower levels are what other CPUs run.
  const std::string_view best = CpuReducer().isa();
  if (best != "avx2" && CpuReducer(CpuReducer::Isa::kAvx2).isa() == "avx2") {
    out.push_back({"cpu_avx2", std::make_shared<CpuReducer>(CpuReducer::Isa::kAvx2)});
  }
  if (best != "portable") {
    out.push_back({"cpu_portable", std::make_shared<CpuReducer>(CpuReducer::Isa::kPortable)});
  }
  return out;
}

// Fast deterministic generator (SplitMix64): sweeps fill millions of elements.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// Mostly ordinary values across the whole exponent range (so sums and products
// overflow and underflow now and then), plus raw bit patterns (NaN payloads,
// subnormals) and the usual suspects.
template <class R>
typename R::T RandomValue(Rng& rng) {
  using T = typename R::T;
  const int pick = rng.Below(100);
  if (pick < 8) {  // any bit pattern at all
    T t;
    const uint64_t bits = rng.Next();
    std::memcpy(&t, &bits, sizeof(T));
    return t;
  }
  if constexpr (R::kFloat) {
    using W = typename R::W;
    using L = std::numeric_limits<W>;
    if (pick < 14) {
      const W specials[] = {0,        -W(0),     L::infinity(),   -L::infinity(), L::quiet_NaN(),
                            L::max(), -L::max(), L::denorm_min(), L::min(),       1};
      return R::Round(specials[rng.Below(std::size(specials))]);
    }
    // The storage type's largest exponent: 15 for float16, the wide type's otherwise.
    const int max_exp = R::Round(W(65536)) == R::Round(L::infinity()) ? 15 : L::max_exponent - 1;
    const int exponent = rng.Below(2 * max_exp + 1) - max_exp;
    const W mantissa = W(1) + W(rng.Next() >> 11) * W(0x1p-53);
    const W value = std::ldexp(mantissa, exponent) * (rng.Below(2) ? W(1) : W(-1));
    return R::Round(value);
  } else {
    using L = std::numeric_limits<T>;
    const T specials[] = {0, 1, T(-1), L::min(), L::max(), T(L::max() / 2 + 1)};
    if (pick < 20) return specials[rng.Below(std::size(specials))];
    return static_cast<T>(rng.Next() >> rng.Below(64));  // small and large magnitudes
  }
}

// count elements of type T starting `offset` elements into a heap block, so SIMD
// code meets misaligned pointers and every head/tail length.
class TypedBuffer {
 public:
  TypedBuffer(size_t elem_size, size_t count, size_t offset)
      : elem_size_(elem_size), offset_(offset), bytes_((count + offset) * elem_size) {}
  void* data() { return bytes_.data() + offset_ * elem_size_; }
  template <typename T>
  T Get(size_t i) const {
    T t;
    std::memcpy(&t, bytes_.data() + (offset_ + i) * elem_size_, sizeof(T));
    return t;
  }
  template <typename T>
  void Set(size_t i, T t) {
    std::memcpy(bytes_.data() + (offset_ + i) * elem_size_, &t, sizeof(T));
  }

 private:
  size_t elem_size_;
  size_t offset_;
  std::vector<uint8_t> bytes_;
};

template <class R>
bool SameValue(typename R::T want, typename R::T got) {
  if constexpr (R::kFloat) {
    if (std::isnan(R::Widen(want)) && std::isnan(R::Widen(got))) return true;
  }
  return std::memcmp(&want, &got, sizeof want) == 0;
}

template <class R>
std::string Show(typename R::T v) {
  if constexpr (R::kFloat) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    return absl::StrCat(R::Widen(v), " (0x", absl::Hex(bits), ")");
  } else {
    return absl::StrCat(static_cast<int64_t>(v));
  }
}

// ========================= 3. Sweeps, bit for bit =========================

constexpr size_t kCounts[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, 4099, 1'000'003};
constexpr size_t kOffsets[] = {0, 1};

std::string Label(const ReducerUnderTest& r, DType d) {
  return absl::StrCat(r.label, "_", DTypeName(d));
}

class CombineSweep
    : public ::testing::TestWithParam<std::tuple<ReducerUnderTest, DType, ReduceOp>> {};

TEST_P(CombineSweep, MatchesReferenceBitForBit) {
  const auto& [rut, dtype, op] = GetParam();
  VisitDType(dtype, [&]<class R>() {
    using T = typename R::T;
    for (size_t count : kCounts) {
      for (size_t offset : kOffsets) {
        SCOPED_TRACE(absl::StrCat("count ", count, ", offset ", offset, " elements"));
        Rng rng(count * 131 + offset * 7 + static_cast<int>(dtype) * 17 + static_cast<int>(op));
        TypedBuffer dst(sizeof(T), count, offset), src(sizeof(T), count, offset + 1);
        std::vector<T> want(count);
        uint64_t want_overflows = 0;
        for (size_t i = 0; i < count; ++i) {
          const T a = RandomValue<R>(rng), b = RandomValue<R>(rng);
          dst.Set(i, a);
          src.Set(i, b);
          want[i] = RefCombine<R>(op, a, b, &want_overflows);
        }
        ReduceStats stats;
        ASSERT_TRUE(
            rut.reducer->Combine(Spec(dtype, op, 3), dst.data(), src.data(), count, &stats).ok());
        for (size_t i = 0; i < count; ++i) {
          ASSERT_TRUE(SameValue<R>(want[i], dst.Get<T>(i)))
              << "element " << i << ": want " << Show<R>(want[i]) << ", got "
              << Show<R>(dst.Get<T>(i));
        }
        EXPECT_EQ(stats.overflows, want_overflows);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllReducers, CombineSweep,
                         ::testing::Combine(::testing::ValuesIn(ReducersUnderTest()),
                                            ::testing::ValuesIn(kAllDTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         [](const auto& info) {
                           return absl::StrCat(
                               Label(std::get<0>(info.param), std::get<1>(info.param)), "_",
                               ReduceOpName(std::get<2>(info.param)));
                         });

// PreScale and Finalize share one kernel shape: x / divisor * scale, rounded once.
class ScaleSweep : public ::testing::TestWithParam<std::tuple<ReducerUnderTest, DType>> {};

TEST_P(ScaleSweep, PreScaleAndFinalizeMatchReferenceBitForBit) {
  const auto& [rut, dtype] = GetParam();
  struct Case {
    ReduceOp op;
    int world_size;
    double pre, post;
  };
  std::vector<Case> cases = {{ReduceOp::kAvg, 3, 1, 1},
                             {ReduceOp::kAvg, 8, 1, 1},
                             {ReduceOp::kSum, 4, 1, 1},
                             {ReduceOp::kMax, 5, 1, 1}};
  if (IsFloatingPoint(dtype)) {
    cases.insert(cases.end(), {{ReduceOp::kAvg, 3, 0.5, 3.0},
                               {ReduceOp::kAvg, 7, 1.0 / 7, 0.1},
                               {ReduceOp::kSum, 2, 1.0 / 3, 1e-3},
                               {ReduceOp::kProd, 1, -2.5, 1e4}});
  }
  VisitDType(dtype, [&]<class R>() {
    using T = typename R::T;
    for (const Case& c : cases) {
      for (size_t count : kCounts) {
        SCOPED_TRACE(absl::StrCat(ReduceOpName(c.op), " world_size ", c.world_size, " pre ", c.pre,
                                  " post ", c.post, " count ", count));
        const ReduceSpec spec = Spec(dtype, c.op, c.world_size, c.pre, c.post);
        const int divisor = c.op == ReduceOp::kAvg ? c.world_size : 1;
        Rng rng(count * 31 + static_cast<int>(dtype));
        TypedBuffer pre(sizeof(T), count, count % 2), fin(sizeof(T), count, 1);
        std::vector<T> want_pre(count), want_fin(count);
        uint64_t want_pre_overflows = 0, want_fin_overflows = 0;
        for (size_t i = 0; i < count; ++i) {
          const T x = RandomValue<R>(rng);
          pre.Set(i, x);
          fin.Set(i, x);
          want_pre[i] = RefScale<R>(x, 1, c.pre, &want_pre_overflows);
          want_fin[i] = RefScale<R>(x, divisor, c.post, &want_fin_overflows);
        }
        ReduceStats pre_stats, fin_stats;
        ASSERT_TRUE(rut.reducer->PreScale(spec, pre.data(), count, &pre_stats).ok());
        ASSERT_TRUE(rut.reducer->Finalize(spec, fin.data(), count, &fin_stats).ok());
        for (size_t i = 0; i < count; ++i) {
          ASSERT_TRUE(SameValue<R>(want_pre[i], pre.Get<T>(i)))
              << "PreScale element " << i << ": want " << Show<R>(want_pre[i]) << ", got "
              << Show<R>(pre.Get<T>(i));
          ASSERT_TRUE(SameValue<R>(want_fin[i], fin.Get<T>(i)))
              << "Finalize element " << i << ": want " << Show<R>(want_fin[i]) << ", got "
              << Show<R>(fin.Get<T>(i));
        }
        EXPECT_EQ(pre_stats.overflows, want_pre_overflows);
        EXPECT_EQ(fin_stats.overflows, want_fin_overflows);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllReducers, ScaleSweep,
                         ::testing::Combine(::testing::ValuesIn(ReducersUnderTest()),
                                            ::testing::ValuesIn(kAllDTypes)),
                         [](const auto& info) {
                           return Label(std::get<0>(info.param), std::get<1>(info.param));
                         });

// ================= 4. Named cases: one rule of the contract each =================
//
// Each case list is spread over kCopies copies (case i at every position p with
// p % cases == i), so every value passes through SIMD bodies and scalar tails, and
// the copies must agree.

constexpr size_t kCopies = 37;

template <typename T>
bool IsNanAs(DType dtype, T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dtype == DType::kFloat16) return std::isnan(Float16ToFloat(v));
    if (dtype == DType::kBFloat16) return std::isnan(BFloat16ToFloat(v));
  }
  return false;
}

template <typename T>
struct Outcome {
  std::vector<T> values;  // one per case
  uint64_t overflows;     // per copy of the case list
};

class ReducerContract : public ::testing::TestWithParam<ReducerUnderTest> {
 protected:
  Reducer& reducer() { return *GetParam().reducer; }

  template <typename T>
  Outcome<T> Combine(const ReduceSpec& spec, const std::vector<T>& dst, const std::vector<T>& src) {
    std::vector<T> d = Spread(dst), s = Spread(src);
    ReduceStats stats;
    EXPECT_TRUE(reducer().Combine(spec, d.data(), s.data(), d.size(), &stats).ok());
    return Gather(spec.dtype, d, dst.size(), stats.overflows);
  }
  template <typename T>
  Outcome<T> PreScale(const ReduceSpec& spec, const std::vector<T>& buf) {
    std::vector<T> b = Spread(buf);
    ReduceStats stats;
    EXPECT_TRUE(reducer().PreScale(spec, b.data(), b.size(), &stats).ok());
    return Gather(spec.dtype, b, buf.size(), stats.overflows);
  }
  template <typename T>
  Outcome<T> Finalize(const ReduceSpec& spec, const std::vector<T>& buf) {
    std::vector<T> b = Spread(buf);
    ReduceStats stats;
    EXPECT_TRUE(reducer().Finalize(spec, b.data(), b.size(), &stats).ok());
    return Gather(spec.dtype, b, buf.size(), stats.overflows);
  }

 private:
  template <typename T>
  static std::vector<T> Spread(const std::vector<T>& cases) {
    std::vector<T> out;
    for (size_t p = 0; p < kCopies * cases.size(); ++p) out.push_back(cases[p % cases.size()]);
    return out;
  }
  template <typename T>
  static Outcome<T> Gather(DType dtype, const std::vector<T>& spread, size_t cases,
                           uint64_t overflows) {
    Outcome<T> out{std::vector<T>(spread.begin(), spread.begin() + cases), overflows / kCopies};
    EXPECT_EQ(overflows % kCopies, 0u) << "overflow count differs between copies of a case";
    for (size_t p = 0; p < spread.size(); ++p) {
      const T& first = out.values[p % cases];
      const bool same = std::memcmp(&spread[p], &first, sizeof(T)) == 0 ||
                        (IsNanAs(dtype, spread[p]) && IsNanAs(dtype, first));
      EXPECT_TRUE(same) << "position " << p << " disagrees with the first copy of case "
                        << p % cases << ": SIMD body and scalar tail differ";
    }
    return out;
  }
};

uint16_t H(float x) { return FloatToFloat16(x); }
uint16_t BF(float x) { return FloatToBFloat16(x); }
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Storage values of a floating dtype from doubles that it holds exactly (or +-inf/NaN).
template <class R>
std::vector<typename R::T> Values(std::initializer_list<double> xs) {
  std::vector<typename R::T> out;
  for (double x : xs) out.push_back(R::Round(static_cast<typename R::W>(x)));
  return out;
}
// NaN must come out NaN; everything else bit for bit, so the sign of zero counts.
template <class R>
void ExpectValues(const std::vector<typename R::T>& got, std::initializer_list<double> want) {
  ASSERT_EQ(got.size(), want.size());
  size_t i = 0;
  for (double w : want) {
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(R::Widen(got[i]))) << "case " << i << ": got " << Show<R>(got[i]);
    } else {
      EXPECT_TRUE(SameValue<R>(R::Round(static_cast<typename R::W>(w)), got[i]))
          << "case " << i << ": want " << w << ", got " << Show<R>(got[i]);
    }
    ++i;
  }
}
template <typename F>
void ForEachFloatDType(F&& f) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(d));
    VisitDType(d, [&]<class R>() {
      if constexpr (R::kFloat) f.template operator()<R>(d);
    });
  }
}

TEST_P(ReducerContract, Float16SumIsComputedInFloat32AndRoundedOnceToNearestEven) {
  // 1 + 2^-11 lies exactly between two halves: the tie goes to the even one, 1.0.
  // 1 + 2^-11 + 2^-21 lies just above that tie. float32 holds the sum exactly, so the
  // one rounding goes up. Truncation would give 1.0, and so would rounding twice
  // through an intermediate too narrow for the 2^-21: it would make the sum a tie.
  const auto out = Combine<uint16_t>(
      Spec(DType::kFloat16, ReduceOp::kSum), {H(1), H(1), H(1 + 0x1p-10f), H(0x1p-24f)},
      {H(0x1p-11f), H(0x1p-11f + 0x1p-21f), H(0x1p-11f), H(0x1p-24f)});
  EXPECT_EQ(out.values[0], 0x3c00) << "tie to even";
  EXPECT_EQ(out.values[1], 0x3c01) << "just above a tie rounds up";
  EXPECT_EQ(out.values[2], 0x3c02) << "tie to even, upward";
  EXPECT_EQ(out.values[3], 0x0002) << "subnormals add exactly";
}

TEST_P(ReducerContract, BFloat16SumIsComputedInFloat32AndRoundedOnceToNearestEven) {
  // Same three cases one bfloat16 ulp (2^-7 at 1.0) up; a truncating narrowing
  // (as some SIMD libraries' bf16 demotion does) fails the second.
  const auto out =
      Combine<uint16_t>(Spec(DType::kBFloat16, ReduceOp::kSum), {BF(1), BF(1), BF(1 + 0x1p-7f)},
                        {BF(0x1p-8f), BF(0x1p-8f + 0x1p-15f), BF(0x1p-8f)});
  EXPECT_EQ(out.values[0], 0x3f80) << "tie to even";
  EXPECT_EQ(out.values[1], 0x3f81) << "just above a tie rounds up";
  EXPECT_EQ(out.values[2], 0x3f82) << "tie to even, upward";
}

TEST_P(ReducerContract, OverflowToInfinityIsCountedOnlyForFiniteOperands) {
  // float16: 65504 + 8 = 65512 rounds back to 65504; 65504 + 16 = 65520 is the tie
  // above the largest half and rounds to inf. inf + 1 was infinite already.
  auto f16 = Combine<uint16_t>(Spec(DType::kFloat16, ReduceOp::kSum),
                               {H(65504), H(65504), H(-65504), H(65504), H(INFINITY)},
                               {H(8), H(16), H(-65504), H(-65504), H(1)});
  EXPECT_EQ(f16.values, (std::vector<uint16_t>{0x7bff, 0x7c00, 0xfc00, 0x0000, 0x7c00}));
  EXPECT_EQ(f16.overflows, 2u);
  f16 =
      Combine<uint16_t>(Spec(DType::kFloat16, ReduceOp::kProd), {H(256), H(255)}, {H(256), H(256)});
  EXPECT_EQ(f16.values, (std::vector<uint16_t>{0x7c00, H(65280)}));
  EXPECT_EQ(f16.overflows, 1u);

  const auto bf16 = Combine<uint16_t>(Spec(DType::kBFloat16, ReduceOp::kSum),
                                      {0x7f7f, 0x7f7f, 0xff7f}, {0x7f7f, 0xff7f, 0xff7f});
  EXPECT_EQ(bf16.values, (std::vector<uint16_t>{0x7f80, 0x0000, 0xff80}));
  EXPECT_EQ(bf16.overflows, 2u);

  const float fmax = std::numeric_limits<float>::max();
  const auto f32 =
      Combine<float>(Spec(DType::kFloat32, ReduceOp::kSum), {fmax, fmax}, {fmax, -fmax});
  EXPECT_EQ(f32.values, (std::vector<float>{INFINITY, 0.0f}));
  EXPECT_EQ(f32.overflows, 1u);
  const auto f64 = Combine<double>(Spec(DType::kFloat64, ReduceOp::kProd), {1e200, 1e200, kInf},
                                   {1e200, -1e200, 2.0});
  EXPECT_EQ(f64.values, (std::vector<double>{kInf, -kInf, kInf}));
  EXPECT_EQ(f64.overflows, 2u);
}

TEST_P(ReducerContract, NanAndInfinityPropagateAsIeeeSays) {
  ForEachFloatDType([&]<class R>(DType d) {
    const auto dst = Values<R>({kNan, 1, kNan, kInf, kInf, 0});
    const auto src = Values<R>({1, kNan, kNan, -kInf, 0, -kInf});
    const auto sum = Combine(Spec(d, ReduceOp::kSum), dst, src);
    ExpectValues<R>(sum.values, {kNan, kNan, kNan, kNan, kInf, -kInf});  // inf + -inf = NaN
    EXPECT_EQ(sum.overflows, 0u);
    ExpectValues<R>(Combine(Spec(d, ReduceOp::kAvg), dst, src).values,
                    {kNan, kNan, kNan, kNan, kInf, -kInf});
    ExpectValues<R>(Combine(Spec(d, ReduceOp::kProd), dst, src).values,
                    {kNan, kNan, kNan, -kInf, kNan, kNan});  // inf * 0 = NaN
  });
}

TEST_P(ReducerContract, MinMaxReturnNanForAnyNanAndKeepDstOnEqualZeros) {
  ForEachFloatDType([&]<class R>(DType d) {
    // IEEE 754-2019 minimum/maximum for NaN (not C's fmin, which drops it); among
    // equal values dst wins, so min(+0, -0) = +0 but min(-0, +0) = -0.
    const auto dst = Values<R>({kNan, 1, 0.0, -0.0, -kInf, 2, kInf});
    const auto src = Values<R>({1, kNan, -0.0, 0.0, 5, -3, kNan});
    ExpectValues<R>(Combine(Spec(d, ReduceOp::kMin), dst, src).values,
                    {kNan, kNan, 0.0, -0.0, -kInf, -3, kNan});
    ExpectValues<R>(Combine(Spec(d, ReduceOp::kMax), dst, src).values,
                    {kNan, kNan, 0.0, -0.0, 5, 2, kNan});
  });
}

TEST_P(ReducerContract, Float16AvgCannotRescueAnOverflowingSumButPreScaleCan) {
  // Combine rounds to float16 after every step, so two ranks holding 60000 overflow
  // before Finalize divides: AVG counts the overflow and keeps the infinity.
  const ReduceSpec avg = Spec(DType::kFloat16, ReduceOp::kAvg, 2);
  const auto sum = Combine<uint16_t>(avg, {H(60000)}, {H(60000)});
  EXPECT_EQ(sum.values[0], 0x7c00);
  EXPECT_EQ(sum.overflows, 1u);
  const auto mean = Finalize<uint16_t>(avg, sum.values);
  EXPECT_EQ(mean.values[0], 0x7c00);
  EXPECT_EQ(mean.overflows, 0u) << "an infinite input is not a new overflow";

  // What keeps fp16 in range is pre_scale = 1 / world_size with SUM.
  const ReduceSpec scaled = Spec(DType::kFloat16, ReduceOp::kSum, 2, 0.5);
  const auto half = PreScale<uint16_t>(scaled, {H(60000)});
  EXPECT_EQ(half.values[0], H(30000));
  const auto total = Combine<uint16_t>(scaled, half.values, half.values);
  EXPECT_EQ(total.values[0], H(60000));
  EXPECT_EQ(total.overflows, 0u);
}

TEST_P(ReducerContract, AvgDividesInTheWideTypeThenPostScalesThenRoundsOnce) {
  // float16 0x3e01 (1.5009765625) / 3 * 3 is 0x3e01 again in float32; rounding to
  // float16 after the division as well would give 0x3e02.
  const auto f16 = Finalize<uint16_t>(Spec(DType::kFloat16, ReduceOp::kAvg, 3, 1.0, 3.0), {0x3e01});
  EXPECT_EQ(f16.values[0], 0x3e01);

  // float32 divides; it does not multiply by a rounded reciprocal: 5 / 3 rounds to
  // 1.66666663 while 5 * (1 / 3.f) rounds to 1.66666675.
  const float divided = 5.0f / 3.0f, by_reciprocal = 5.0f * (1.0f / 3.0f);
  ASSERT_NE(divided, by_reciprocal) << "the case must tell the two apart";
  const auto f32 = Finalize<float>(Spec(DType::kFloat32, ReduceOp::kAvg, 3), {5.0f});
  EXPECT_EQ(std::bit_cast<uint32_t>(f32.values[0]), std::bit_cast<uint32_t>(divided));
  const auto f64 = Finalize<double>(Spec(DType::kFloat64, ReduceOp::kAvg, 3), {5.0});
  EXPECT_EQ(f64.values[0], 5.0 / 3.0);
}

TEST_P(ReducerContract, ScalesComputeInTheWideTypeAndRoundOnce) {
  EXPECT_EQ(PreScale<float>(Spec(DType::kFloat32, ReduceOp::kSum, 4, 0.5), {3.0f}).values[0], 1.5f);

  // For float16 the wide type is float32, so the scale is first rounded to float32:
  // 1 + 2^-11 + 2^-30 becomes 1 + 2^-11, and 1.0 times it is a tie that goes to even,
  // 1.0. Computing in double would have given 0x3c01. The contract says float32.
  const double scale = 1.0 + 0x1p-11 + 0x1p-30;
  EXPECT_EQ(PreScale<uint16_t>(Spec(DType::kFloat16, ReduceOp::kSum, 2, scale), {H(1)}).values[0],
            0x3c00);

  // Scaling can overflow too; it is counted like a combine.
  const auto pre = PreScale<uint16_t>(Spec(DType::kFloat16, ReduceOp::kSum, 2, 2.0),
                                      {H(40000), H(INFINITY), H(1)});
  EXPECT_EQ(pre.values, (std::vector<uint16_t>{0x7c00, 0x7c00, H(2)}));
  EXPECT_EQ(pre.overflows, 1u);
  const auto post =
      Finalize<uint16_t>(Spec(DType::kBFloat16, ReduceOp::kMax, 2, 1.0, 2.0), {0x7f7f, BF(-3)});
  EXPECT_EQ(post.values, (std::vector<uint16_t>{0x7f80, BF(-6)}));
  EXPECT_EQ(post.overflows, 1u);
}

TEST_P(ReducerContract, UnitScalesAndNonAvgFinalizeLeaveBytesUntouched) {
  // Even a signaling NaN's payload survives: these calls must not touch the buffer.
  const std::vector<float> buf = {std::bit_cast<float>(0x7f800001u), -0.0f, 3.0f};
  const auto same = [&](const std::vector<float>& got) {
    return std::memcmp(got.data(), buf.data(), buf.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(PreScale<float>(Spec(DType::kFloat32, ReduceOp::kSum, 4), buf).values));
  EXPECT_TRUE(same(Finalize<float>(Spec(DType::kFloat32, ReduceOp::kSum, 4), buf).values));
  EXPECT_TRUE(same(Finalize<float>(Spec(DType::kFloat32, ReduceOp::kMax, 8), buf).values));
  EXPECT_TRUE(same(Finalize<float>(Spec(DType::kFloat32, ReduceOp::kAvg, 1), buf).values));
}

TEST_P(ReducerContract, IntegerSumAndProdWrapModuloTwoToTheBits) {
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  const auto i32 =
      Combine<int32_t>(Spec(DType::kInt32, ReduceOp::kSum), {kMax32, kMin32, -1}, {1, -1, 1});
  EXPECT_EQ(i32.values, (std::vector<int32_t>{kMin32, kMax32, 0}));
  EXPECT_EQ(i32.overflows, 0u) << "overflow counting is for floating types";
  EXPECT_EQ(Combine<int64_t>(Spec(DType::kInt64, ReduceOp::kSum),
                             {std::numeric_limits<int64_t>::max()}, {1})
                .values[0],
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Combine<int8_t>(Spec(DType::kInt8, ReduceOp::kSum), {127, -128}, {1, -1}).values,
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Combine<uint8_t>(Spec(DType::kUInt8, ReduceOp::kSum), {255, 200}, {1, 100}).values,
            (std::vector<uint8_t>{0, 44}));

  // 46341^2 = 2^31 + 4633 wraps to -2^31 + 4633.
  EXPECT_EQ(
      Combine<int32_t>(Spec(DType::kInt32, ReduceOp::kProd), {65536, 46341}, {65536, 46341}).values,
      (std::vector<int32_t>{0, kMin32 + 4633}));
  EXPECT_EQ(
      Combine<int64_t>(Spec(DType::kInt64, ReduceOp::kProd), {int64_t{1} << 32}, {int64_t{1} << 32})
          .values[0],
      0);
  EXPECT_EQ(Combine<int8_t>(Spec(DType::kInt8, ReduceOp::kProd), {16, -128}, {16, -1}).values,
            (std::vector<int8_t>{0, -128}));
  EXPECT_EQ(Combine<uint8_t>(Spec(DType::kUInt8, ReduceOp::kProd), {16}, {17}).values[0], 16);
}

TEST_P(ReducerContract, IntegerAvgTruncatesTheWrappedSumTowardZero) {
  EXPECT_EQ(Finalize<int32_t>(Spec(DType::kInt32, ReduceOp::kAvg, 2),
                              {-7, 7, -1, std::numeric_limits<int32_t>::min()})
                .values,
            (std::vector<int32_t>{-3, 3, 0, -(1 << 30)}));
  EXPECT_EQ(Finalize<int64_t>(Spec(DType::kInt64, ReduceOp::kAvg, 4), {-9, 9}).values,
            (std::vector<int64_t>{-2, 2}));
  EXPECT_EQ(Finalize<uint8_t>(Spec(DType::kUInt8, ReduceOp::kAvg, 2), {255}).values[0], 127);
  // int8 100 + 100 wraps to -56 in Combine; the average of the wrapped sum is -28.
  const ReduceSpec avg = Spec(DType::kInt8, ReduceOp::kAvg, 2);
  const auto sum = Combine<int8_t>(avg, {100}, {100});
  EXPECT_EQ(sum.values[0], -56);
  EXPECT_EQ(Finalize<int8_t>(avg, sum.values).values[0], -28);
}

TEST_P(ReducerContract, IntegerMinMaxCompareInTheElementType) {
  EXPECT_EQ(Combine<uint8_t>(Spec(DType::kUInt8, ReduceOp::kMin), {200, 0}, {100, 255}).values,
            (std::vector<uint8_t>{100, 0}));
  EXPECT_EQ(Combine<int8_t>(Spec(DType::kInt8, ReduceOp::kMax), {-1, -128}, {1, 127}).values,
            (std::vector<int8_t>{1, 127}));
  EXPECT_EQ(
      Combine<int32_t>(Spec(DType::kInt32, ReduceOp::kMin), {std::numeric_limits<int32_t>::max()},
                       {std::numeric_limits<int32_t>::min()})
          .values[0],
      std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Combine<int64_t>(Spec(DType::kInt64, ReduceOp::kMax), {-5, int64_t{1} << 40},
                             {-6, (int64_t{1} << 40) + 1})
                .values,
            (std::vector<int64_t>{-5, (int64_t{1} << 40) + 1}));
}

TEST_P(ReducerContract, StatsAccumulateAcrossCallsAndMayBeOmitted) {
  const ReduceSpec spec = Spec(DType::kFloat16, ReduceOp::kSum);
  std::vector<uint16_t> dst = {H(65504)}, src = {H(65504)};
  ReduceStats stats;
  stats.overflows = 5;
  ASSERT_TRUE(reducer().Combine(spec, dst.data(), src.data(), 1, &stats).ok());
  EXPECT_EQ(stats.overflows, 6u);
  dst = {H(65504)};
  EXPECT_TRUE(reducer().Combine(spec, dst.data(), src.data(), 1, nullptr).ok());
  EXPECT_EQ(dst[0], 0x7c00);
}

TEST_P(ReducerContract, RejectsInvalidSpecsAndAcceptsEmptyBuffers) {
  float x = 1, y = 2;
  EXPECT_EQ(reducer().Combine(Spec(DType::kFloat32, ReduceOp::kAvg, 0), &x, &y, 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  int32_t i = 1;
  EXPECT_EQ(reducer().PreScale(Spec(DType::kInt32, ReduceOp::kSum, 2, 2.0), &i, 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      reducer().Finalize(Spec(DType::kFloat32, static_cast<ReduceOp>(9)), &x, 1, nullptr).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x, 1.0f) << "a rejected call leaves the buffer alone";
  EXPECT_TRUE(
      reducer().Combine(Spec(DType::kFloat16, ReduceOp::kSum), nullptr, nullptr, 0, nullptr).ok());
}

TEST_P(ReducerContract, ConcurrentCallsOnDisjointBuffersMatchTheReference) {
  constexpr int kThreads = 4;
  constexpr size_t kCount = 50'000;
  std::vector<std::vector<uint16_t>> dst(kThreads), src(kThreads), want(kThreads);
  Rng rng(42);
  for (int t = 0; t < kThreads; ++t) {
    uint64_t ignored = 0;
    for (size_t i = 0; i < kCount; ++i) {
      dst[t].push_back(RandomValue<RefBF16>(rng));
      src[t].push_back(RandomValue<RefBF16>(rng));
      want[t].push_back(RefCombine<RefBF16>(ReduceOp::kSum, dst[t][i], src[t][i], &ignored));
    }
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {  // Combine is not idempotent: redo from a copy
        std::vector<uint16_t> d = dst[t];
        EXPECT_TRUE(reducer()
                        .Combine(Spec(DType::kBFloat16, ReduceOp::kSum), d.data(), src[t].data(),
                                 kCount, nullptr)
                        .ok());
        for (size_t i = 0; i < kCount; ++i) {
          if (!SameValue<RefBF16>(want[t][i], d[i])) {
            ADD_FAILURE() << "thread " << t << " element " << i;
            return;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

INSTANTIATE_TEST_SUITE_P(AllReducers, ReducerContract, ::testing::ValuesIn(ReducersUnderTest()),
                         [](const auto& info) { return info.param.label; });

// CPU-specific guard rails: the Reducer contract makes these preconditions; the CPU
// reducer checks them because a wrong answer would be silent.
TEST(CpuReducer, RefusesOverlappingOrNullBuffers) {
  std::vector<float> buf(64, 1.0f);
  CpuReducer cpu;
  const ReduceSpec spec = Spec(DType::kFloat32, ReduceOp::kSum);
  const absl::Status overlap = cpu.Combine(spec, buf.data(), buf.data() + 8, 32, nullptr);
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(overlap.message()), HasSubstr("overlap"));
  EXPECT_TRUE(cpu.Combine(spec, buf.data(), buf.data() + 32, 32, nullptr).ok())
      << "adjacent is fine";
  EXPECT_EQ(cpu.Combine(spec, nullptr, buf.data(), 4, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu.PreScale(spec, nullptr, 4, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuReducer, NamesItselfCpuAndReportsItsKernels) {
  EXPECT_EQ(CpuReducer().name(), "cpu");
  EXPECT_EQ(CpuReducer(CpuReducer::Isa::kPortable).isa(), "portable");
  const std::string_view best = CpuReducer().isa();
  EXPECT_TRUE(best == "portable" || best == "avx2" || best == "avx512") << best;
  EXPECT_NE(CpuReducer(CpuReducer::Isa::kAvx2).isa(), "avx512");
}

}  // namespace
}  // namespace ringsync
