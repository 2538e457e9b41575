// CudaReducer against CpuReducer, bit for bit: every dtype x op, odd counts, pieces
// far smaller than a call (to run the double-buffered pipeline many times), misaligned
// host and device pointers, page-locked buffers, concurrent callers.
//
// Without a usable GPU every test skips with CUDA's own reason.
#include "core/reduce/cuda/cuda_reducer.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "core/reduce/cpu_reducer.h"
#include "core/reduce/cuda/reduce_kernels.h"
#include "core/testing/dtype_op_params.h"
#include "gtest/gtest.h"

namespace ringsync {
namespace {

// Empty when a device is usable, else why not.
std::string NoDeviceReason() {
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return std::string(count.status().message());
  if (*count == 0) return "cudaGetDeviceCount found 0 devices";
  return "";
}

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    if (const std::string why = NoDeviceReason(); !why.empty()) {            \
      GTEST_SKIP() << "no CUDA device: " << why;                             \
    }                                                                        \
  } while (false)

// Random storage bits with the awkward values over-represented: NaN with payloads,
// +-inf, +-0, subnormals, the largest finite values, and "ordinary" numbers whose sums
// and products need rounding.
std::vector<uint8_t> Nasty(DType dtype, size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const size_t size = DTypeSize(dtype);
  std::vector<uint8_t> bytes(count * size);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = rng();
    const uint64_t pick = rng() % 8;
    if (dtype == DType::kFloat32 && pick < 4) {
      const float ordinary = std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng);
      const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 3.4e38f, -3.4e38f, 1e-40f,
                                std::bit_cast<float>(0x7fa00001u), std::bit_cast<float>(0xffc12345u)};
      const float x = pick == 0 ? specials[rng() % std::size(specials)] : ordinary;
      bits = std::bit_cast<uint32_t>(x);
    } else if (dtype == DType::kFloat64 && pick < 4) {
      const double ordinary = std::uniform_real_distribution<double>(-1e3, 1e3)(rng);
      const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, 1.7e308, 4e-320,
                                 std::bit_cast<double>(0x7ff4000000000001ull)};
      bits = std::bit_cast<uint64_t>(pick == 0 ? specials[rng() % std::size(specials)] : ordinary);
    } else if ((dtype == DType::kFloat16 || dtype == DType::kBFloat16) && pick < 3) {
      // Values near 1 and near the top of the range, where sums round or overflow.
      const uint16_t near_one = dtype == DType::kFloat16 ? 0x3c00 : 0x3f80;
      const uint16_t near_max = dtype == DType::kFloat16 ? 0x7bf0 : 0x7f70;
      bits = ((pick == 0 ? near_max : near_one) + (rng() % 64)) | ((rng() & 1) << 15);
    }
    std::memcpy(&bytes[i * size], &bits, size);
  }
  return bytes;
}

bool IsNanAt(DType dtype, const uint8_t* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, DTypeSize(dtype));
  switch (dtype) {
    case DType::kFloat32: return (bits & 0x7fffffffu) > 0x7f800000u;
    case DType::kFloat64: return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    case DType::kFloat16: return (bits & 0x7fffu) > 0x7c00u;
    case DType::kBFloat16: return (bits & 0x7fffu) > 0x7f80u;
    default: return false;
  }
}

// First element where the reducers disagree, for a readable failure; "" if none.
// When both combine operands are NaN, any NaN result is accepted: which of the two the
// CPU reducer returns is up to the compiler (gcc commutes `a + b` in some loops).
std::string FirstDifference(DType dtype, const uint8_t* a, const uint8_t* b, const uint8_t* want,
                            const uint8_t* got, size_t count) {
  const size_t size = DTypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = i * size;
    if (std::memcmp(want + at, got + at, size) == 0) continue;
    if (b != nullptr && IsNanAt(dtype, a + at) && IsNanAt(dtype, b + at) &&
        IsNanAt(dtype, want + at) && IsNanAt(dtype, got + at)) {
      continue;
    }
    uint64_t w = 0, g = 0, x = 0, y = 0;
    std::memcpy(&w, want + at, size);
    std::memcpy(&g, got + at, size);
    std::memcpy(&x, a + at, size);
    if (b != nullptr) std::memcpy(&y, b + at, size);
    return absl::StrFormat("element %d of %d: inputs 0x%x 0x%x, cpu 0x%x, cuda 0x%x", i, count, x,
                           y, w, g);
  }
  return "";
}

using Case = testing::DTypeAndOp;

class CudaMatchesCpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  // Runs Combine on both reducers at the given element offsets into larger buffers, so
  // the pointers are misaligned whenever an offset is not a multiple of 16 bytes.
  void ExpectSameCombine(CudaReducer& cuda, size_t count, size_t dst_offset_bytes,
                         size_t src_offset_bytes, uint32_t seed) {
    const auto [dtype, op] = GetParam();
    const size_t size = DTypeSize(dtype);
    const ReduceSpec spec{.dtype = dtype, .op = op, .world_size = 3};
    const std::vector<uint8_t> a = Nasty(dtype, count, seed);
    const std::vector<uint8_t> b = Nasty(dtype, count, seed + 1);
    std::vector<uint8_t> cpu_dst(a), gpu_space(count * size + 64), src_space(count * size + 64);
    uint8_t* gpu_dst = gpu_space.data() + dst_offset_bytes;
    uint8_t* src = src_space.data() + src_offset_bytes;
    std::memcpy(gpu_dst, a.data(), a.size());
    std::memcpy(src, b.data(), b.size());

    ReduceStats cpu_stats, gpu_stats;
    ASSERT_TRUE(cpu_.Combine(spec, cpu_dst.data(), b.data(), count, &cpu_stats).ok());
    const absl::Status s = cuda.Combine(spec, gpu_dst, src, count, &gpu_stats);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(FirstDifference(dtype, a.data(), b.data(), cpu_dst.data(), gpu_dst, count), "")
        << DTypeName(dtype) << " " << ReduceOpName(op) << " count " << count << " offsets "
        << dst_offset_bytes << "/" << src_offset_bytes;
    EXPECT_EQ(gpu_stats.overflows, cpu_stats.overflows);
  }

  CpuReducer cpu_;
};

TEST_P(CudaMatchesCpuTest, CombineOddCountsThroughManyPieces) {
  // 1000-byte pieces: not a multiple of 16, so pieces start at odd element offsets.
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0, {.piece_bytes = 1000});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  uint32_t seed = 1;
  for (size_t count : {1, 2, 7, 17, 255, 1001, 4099, 100003}) {
    ExpectSameCombine(**cuda, count, 0, 0, seed += 2);
  }
}

TEST_P(CudaMatchesCpuTest, CombineDefaultPiecesLargeBuffer) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ExpectSameCombine(**cuda, (size_t{3} << 20) / DTypeSize(std::get<0>(GetParam())) + 13, 0, 0, 7);
}

TEST_P(CudaMatchesCpuTest, CombineMisalignedHostPointers) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0, {.piece_bytes = 4096});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const size_t size = DTypeSize(std::get<0>(GetParam()));
  ExpectSameCombine(**cuda, 10007, size, 3 * size, 11);  // element-misaligned by 1 and 3
  ExpectSameCombine(**cuda, 10007, 1, 5, 13);            // not even element-aligned
}

TEST_P(CudaMatchesCpuTest, KernelOnMisalignedDevicePointers) {
  const auto [dtype, op] = GetParam();
  const size_t size = DTypeSize(dtype), count = 5003;
  const std::vector<uint8_t> a = Nasty(dtype, count, 21), b = Nasty(dtype, count, 22);
  std::vector<uint8_t> want(a), got(a.size());
  ASSERT_TRUE(cpu_.Combine({.dtype = dtype, .op = op}, want.data(), b.data(), count, nullptr).ok());

  void* dst = nullptr;
  void* src = nullptr;
  void* counter = nullptr;
  ASSERT_EQ(cudaMalloc(&dst, a.size() + 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&src, b.size() + 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&counter, sizeof(unsigned long long)), cudaSuccess);
  auto* overflows = static_cast<unsigned long long*>(counter);
  // dst misaligned by one element, src by three: the kernel must take its scalar path.
  auto* d = static_cast<uint8_t*>(dst) + size;
  auto* s = static_cast<uint8_t*>(src) + 3 * size;
  ASSERT_EQ(cudaMemcpy(d, a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(s, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(counter, 0, sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cuda::LaunchCombine(dtype, op, d, s, count, overflows, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), d, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(FirstDifference(dtype, a.data(), b.data(), want.data(), got.data(), count), "");
  cudaFree(dst);
  cudaFree(src);
  cudaFree(counter);
}

TEST_P(CudaMatchesCpuTest, PreScaleAndFinalize) {
  const auto [dtype, op] = GetParam();
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0, {.piece_bytes = 2048});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const bool floating = IsFloatingPoint(dtype);
  const size_t size = DTypeSize(dtype), count = 9001;
  std::vector<ReduceSpec> specs;
  for (int world_size : {1, 3, 7}) {
    specs.push_back({.dtype = dtype, .op = op, .world_size = world_size});
    if (floating) {
      for (double scale : {0.5, 3.0, 1e-3, 0.1, 1e30}) {
        specs.push_back({.dtype = dtype, .op = op, .world_size = world_size, .pre_scale = scale,
                         .post_scale = 1.0 / scale});
      }
    }
  }
  uint32_t seed = 31;
  for (const ReduceSpec& spec : specs) {
    const std::vector<uint8_t> x = Nasty(dtype, count, seed++);
    std::vector<uint8_t> cpu_buf(x), gpu_buf(count * size + 1);
    uint8_t* gpu = gpu_buf.data() + 1;  // misaligned on purpose
    std::memcpy(gpu, x.data(), x.size());
    ReduceStats cpu_stats, gpu_stats;
    ASSERT_TRUE(cpu_.PreScale(spec, cpu_buf.data(), count, &cpu_stats).ok());
    ASSERT_TRUE(cpu_.Finalize(spec, cpu_buf.data(), count, &cpu_stats).ok());
    ASSERT_TRUE((*cuda)->PreScale(spec, gpu, count, &gpu_stats).ok());
    ASSERT_TRUE((*cuda)->Finalize(spec, gpu, count, &gpu_stats).ok());
    EXPECT_EQ(FirstDifference(dtype, x.data(), nullptr, cpu_buf.data(), gpu, count), "")
        << "world_size " << spec.world_size << " pre_scale " << spec.pre_scale;
    EXPECT_EQ(gpu_stats.overflows, cpu_stats.overflows) << "pre_scale " << spec.pre_scale;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDTypeAndOp, CudaMatchesCpuTest, testing::EveryDTypeAndOp(),
                         testing::DTypeAndOpName);

class CudaReducerTest : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_F(CudaReducerTest, PageLockedBuffersSkipStagingAndMatch) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0, {.piece_bytes = 4096});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const size_t count = 50001;
  const ReduceSpec spec{.dtype = DType::kBFloat16, .op = ReduceOp::kSum};
  const std::vector<uint8_t> a = Nasty(spec.dtype, count, 41), b = Nasty(spec.dtype, count, 42);
  void* dst = nullptr;
  void* src = nullptr;
  ASSERT_EQ(cudaMallocHost(&dst, a.size()), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&src, b.size()), cudaSuccess);
  std::memcpy(dst, a.data(), a.size());
  std::memcpy(src, b.data(), b.size());
  std::vector<uint8_t> want(a);
  ASSERT_TRUE(CpuReducer().Combine(spec, want.data(), b.data(), count, nullptr).ok());
  const absl::Status s = (*cuda)->Combine(spec, dst, src, count, nullptr);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(FirstDifference(spec.dtype, a.data(), b.data(), want.data(),
                            static_cast<uint8_t*>(dst), count), "");
  cudaFreeHost(dst);
  cudaFreeHost(src);
}

TEST_F(CudaReducerTest, ConcurrentCallersOnDisjointBuffers) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0, {.piece_bytes = 8192});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const ReduceSpec spec{.dtype = DType::kFloat32, .op = ReduceOp::kSum};
  constexpr int kThreads = 4;
  const size_t count = 200003;
  std::vector<std::vector<uint8_t>> dst(kThreads), src(kThreads), want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    dst[t] = Nasty(spec.dtype, count, 50 + 2 * t);
    src[t] = Nasty(spec.dtype, count, 51 + 2 * t);
    want[t] = dst[t];
    ASSERT_TRUE(CpuReducer().Combine(spec, want[t].data(), src[t].data(), count, nullptr).ok());
  }
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 3 && results[t].ok(); ++repeat) {
        std::vector<uint8_t> work = dst[t];
        results[t] = (*cuda)->Combine(spec, work.data(), src[t].data(), count, nullptr);
        const std::string diff = FirstDifference(spec.dtype, dst[t].data(), src[t].data(),
                                                 want[t].data(), work.data(), count);
        if (results[t].ok() && !diff.empty()) results[t] = absl::InternalError(diff);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(results[t].ok()) << "thread " << t << ": " << results[t];
}

TEST_F(CudaReducerTest, RefusesWhatTheCpuReducerRefuses) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ((*cuda)->name(), "cuda:0");
  std::vector<float> buf(64);
  const ReduceSpec sum{.dtype = DType::kFloat32, .op = ReduceOp::kSum};
  EXPECT_EQ((*cuda)->Combine(sum, buf.data(), buf.data() + 8, 16, nullptr).code(),
            absl::StatusCode::kInvalidArgument);  // overlap
  EXPECT_EQ((*cuda)->Combine({.dtype = DType::kInt32, .pre_scale = 2.0}, buf.data(),
                             buf.data() + 32, 16, nullptr).code(),
            absl::StatusCode::kInvalidArgument);  // scale on an integer type
  EXPECT_EQ((*cuda)->Combine({.world_size = 0}, buf.data(), buf.data() + 32, 16, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*cuda)->Combine(sum, buf.data(), buf.data() + 32, 0, nullptr).ok());
}

TEST_F(CudaReducerTest, DeviceBeyondTheMachineFailsWithCount) {
  const absl::StatusOr<int> count = CudaDeviceCount();
  ASSERT_TRUE(count.ok());
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(*count);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cuda.status().message().find("CUDA device(s)"), std::string::npos) << cuda.status();
}

// Runs everywhere: without a GPU the reason must carry CUDA's error text.
TEST(CudaDeviceCountTest, ReportsCudaErrorText) {
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (count.ok()) {
    EXPECT_GE(*count, 0);
    return;
  }
  EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(count.status().message().find("cudaGetDeviceCount: "), std::string::npos);
  EXPECT_NE(count.status().message().find("(cudaError"), std::string::npos) << count.status();
}

}  // namespace
}  // namespace ringsync
