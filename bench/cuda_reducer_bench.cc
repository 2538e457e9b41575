// cuda_reducer_bench: how close the CUDA reduction kernels come to the GPU's memory
// bandwidth, and what the host-to-host Reducer::Combine achieves including copies.
//
//   cuda_reducer_bench [--size_mib=256] [--runs=20] [--host_runs=5]
//
// Kernel rows: device-resident buffers, timed with CUDA events, median of --runs
// launches. Bandwidth counts bytes read + written (combine: 2 reads + 1 write per
// element; scale: 1 + 1) over the theoretical peak 2 x memory clock x bus width
// (cudaDeviceGetAttribute; CUDA 13 removed cudaDeviceProp::memoryClockRate).
// Targets on an H200: float32 sum >= 80% of peak, float16/bfloat16 sum >= 70%.
//
// Host rows: pageable (and page-locked) host buffers through CudaReducer::Combine,
// median of --host_runs, next to CpuReducer on the same buffers.
//
// A plain program rather than Google Benchmark: the rows need CUDA-event timing, a
// median, and a fraction of a device-specific peak. Without a GPU it prints
// "no CUDA device: <reason>" and exits 0, so it can run in any CI.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "core/reduce/cpu_reducer.h"
#include "core/reduce/cuda/cuda_reducer.h"
#include "core/reduce/cuda/cuda_resources.h"
#include "core/reduce/cuda/cuda_status.h"
#include "core/reduce/cuda/reduce_kernels.h"

ABSL_FLAG(int, size_mib, 256, "MiB per operand buffer");
ABSL_FLAG(int, runs, 20, "timed kernel launches per row (median reported)");
ABSL_FLAG(int, host_runs, 5, "timed host-to-host Combine calls per row (median reported)");

namespace ringsync {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct DeviceInfo {
  int sms = 0;
  int clock_khz = 0;
  int bus_bits = 0;
  double peak_bytes_per_s = 0;
};

absl::StatusOr<DeviceInfo> QueryDevice(int device) {
  DeviceInfo info;
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrMemoryClockRate, device), "memory clock");
  RINGSYNC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.bus_bits, cudaDevAttrGlobalMemoryBusWidth, device), "bus width");
  // Double data rate: two transfers per memory clock (HBM and GDDR as CUDA reports them).
  info.peak_bytes_per_s = 2.0 * info.clock_khz * 1e3 * (info.bus_bits / 8.0);
  return info;
}

// Median seconds of `runs` launches of `launch` on `stream`, timed by CUDA events.
absl::StatusOr<double> TimeKernel(const std::function<cudaError_t(cudaStream_t)>& launch,
                                  int runs) {
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create();
  absl::StatusOr<cuda::Event> start = cuda::Event::Create(/*timing=*/true);
  absl::StatusOr<cuda::Event> stop = cuda::Event::Create(/*timing=*/true);
  if (!stream.ok()) return stream.status();
  if (!start.ok()) return start.status();
  if (!stop.ok()) return stop.status();
  for (int warmup = 0; warmup < 2; ++warmup) {
    RINGSYNC_CUDA_RETURN_IF_ERROR(launch(stream->get()), "warm-up launch");
  }
  std::vector<double> seconds;
  for (int run = 0; run < runs; ++run) {
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(start->get(), stream->get()), "cudaEventRecord");
    RINGSYNC_CUDA_RETURN_IF_ERROR(launch(stream->get()), "kernel launch");
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop->get(), stream->get()), "cudaEventRecord");
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop->get()), "kernel run");
    float ms = 0;
    RINGSYNC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start->get(), stop->get()),
                                  "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
  }
  return Median(std::move(seconds));
}

struct KernelRow {
  const char* label;
  DType dtype;
  ReduceOp op;
  bool scale;      // Finalize-style scale kernel instead of combine
  double target;   // fraction of peak; 0 = no target
};

absl::Status RunKernelRows(const DeviceInfo& info, size_t bytes, int runs) {
  cuda::Buffer dst(cuda::Buffer::Kind::kDevice), src(cuda::Buffer::Kind::kDevice);
  unsigned long long* counter = nullptr;
  cuda::Buffer counter_buffer(cuda::Buffer::Kind::kDevice);
  if (absl::Status s = dst.Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = src.Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = counter_buffer.Reserve(sizeof(*counter)); !s.ok()) return s;
  counter = static_cast<unsigned long long*>(counter_buffer.data());
  // 0x3c bytes are ordinary normal numbers in every float type (float16 1.06, float32
  // 0.0115); repeated in-place sums stay far from overflow.
  RINGSYNC_CUDA_RETURN_IF_ERROR(cudaMemset(dst.data(), 0x3c, bytes), "cudaMemset");
  RINGSYNC_CUDA_RETURN_IF_ERROR(cudaMemset(src.data(), 0x3c, bytes), "cudaMemset");
  RINGSYNC_CUDA_RETURN_IF_ERROR(cudaMemset(counter, 0, sizeof(*counter)), "cudaMemset");

  const KernelRow rows[] = {
      {"float32 sum", DType::kFloat32, ReduceOp::kSum, false, 0.80},
      {"float16 sum", DType::kFloat16, ReduceOp::kSum, false, 0.70},
      {"bfloat16 sum", DType::kBFloat16, ReduceOp::kSum, false, 0.70},
      {"float64 sum", DType::kFloat64, ReduceOp::kSum, false, 0},
      {"float32 max", DType::kFloat32, ReduceOp::kMax, false, 0},
      {"bfloat16 prod", DType::kBFloat16, ReduceOp::kProd, false, 0},
      {"int32 sum", DType::kInt32, ReduceOp::kSum, false, 0},
      {"int8 sum", DType::kInt8, ReduceOp::kSum, false, 0},
      {"float32 avg fin", DType::kFloat32, ReduceOp::kAvg, true, 0},
      {"bfloat16 avg fin", DType::kBFloat16, ReduceOp::kAvg, true, 0},
  };
  std::printf("\nkernel, device-resident, %zu MiB per operand, median of %d launches\n",
              bytes >> 20, runs);
  std::printf("  %-18s %10s %9s  %s\n", "row", "GB/s", "of peak", "target");
  for (const KernelRow& row : rows) {
    const size_t count = bytes / DTypeSize(row.dtype);
    const cuda::ScaleArgs avg{.divide = true, .divisor = 8, .multiply = true, .factor = 1.0};
    const auto launch = [&](cudaStream_t stream) {
      return row.scale ? cuda::LaunchScale(row.dtype, avg, dst.data(), count, counter, stream)
                       : cuda::LaunchCombine(row.dtype, row.op, dst.data(), src.data(), count,
                                             counter, stream);
    };
    absl::StatusOr<double> seconds = TimeKernel(launch, runs);
    if (!seconds.ok()) return seconds.status();
    const double moved = static_cast<double>(count * DTypeSize(row.dtype)) * (row.scale ? 2 : 3);
    const double rate = moved / *seconds;
    const double fraction = rate / info.peak_bytes_per_s;
    std::printf("  %-18s %10.1f %8.1f%%  ", row.label, rate / 1e9, 100 * fraction);
    if (row.target > 0) {
      std::printf(">= %.0f%% %s", 100 * row.target, fraction >= row.target ? "MET" : "MISSED");
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

// Median seconds of `runs` calls of reducer.Combine on fresh copies of the inputs.
absl::StatusOr<double> TimeHostCombine(Reducer& reducer, const ReduceSpec& spec, void* dst,
                                       const void* src, size_t count, int runs) {
  std::vector<double> seconds;
  for (int run = 0; run <= runs; ++run) {  // run 0 warms up lanes and page mappings
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = reducer.Combine(spec, dst, src, count, nullptr); !s.ok()) return s;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (run > 0) seconds.push_back(took.count());
  }
  return Median(std::move(seconds));
}

absl::Status RunHostRows(size_t bytes, int runs) {
  absl::StatusOr<std::unique_ptr<CudaReducer>> cuda = MakeCudaReducer(0);
  if (!cuda.ok()) return cuda.status();
  CpuReducer cpu;
  std::vector<uint8_t> dst(bytes, 0x3c), src(bytes, 0x3c);
  cuda::Buffer pinned_dst(cuda::Buffer::Kind::kPinnedHost), pinned_src(cuda::Buffer::Kind::kPinnedHost);
  if (absl::Status s = pinned_dst.Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = pinned_src.Reserve(bytes); !s.ok()) return s;
  std::memset(pinned_dst.data(), 0x3c, bytes);
  std::memset(pinned_src.data(), 0x3c, bytes);

  std::printf("\nhost-to-host Reducer::Combine, %zu MiB per operand, copies included, median of %d\n",
              bytes >> 20, runs);
  std::printf("  %-10s %-9s %-12s %10s\n", "reducer", "dtype", "host memory", "GB/s");
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const ReduceSpec spec{.dtype = dtype, .op = ReduceOp::kSum};
    const size_t count = bytes / DTypeSize(dtype);
    struct Variant {
      Reducer* reducer;
      const char* memory;
      void* dst;
      const void* src;
    };
    for (const Variant& v : {Variant{cuda->get(), "pageable", dst.data(), src.data()},
                             Variant{cuda->get(), "page-locked", pinned_dst.data(), pinned_src.data()},
                             Variant{&cpu, "pageable", dst.data(), src.data()}}) {
      absl::StatusOr<double> seconds = TimeHostCombine(*v.reducer, spec, v.dst, v.src, count, runs);
      if (!seconds.ok()) return seconds.status();
      std::printf("  %-10s %-9s %-12s %10.1f\n", v.reducer->name().c_str(),
                  std::string(DTypeName(dtype)).c_str(), v.memory, 3.0 * bytes / *seconds / 1e9);
    }
  }
  return absl::OkStatus();
}

int Main() {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok() || *devices == 0) {
    std::printf("no CUDA device: %s\n",
                devices.ok() ? "cudaGetDeviceCount found 0 devices"
                             : std::string(devices.status().message()).c_str());
    return 0;
  }
  const size_t bytes = static_cast<size_t>(std::max(absl::GetFlag(FLAGS_size_mib), 1)) << 20;
  const int runs = std::max(absl::GetFlag(FLAGS_runs), 1);
  const int host_runs = std::max(absl::GetFlag(FLAGS_host_runs), 1);
  absl::Status status = cuda::CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)");
  absl::StatusOr<DeviceInfo> info = status.ok() ? QueryDevice(0) : absl::StatusOr<DeviceInfo>(status);
  if (!info.ok()) {
    std::fprintf(stderr, "cuda:0: %s\n", std::string(info.status().message()).c_str());
    return 1;
  }
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  std::printf("cuda:0 %s (sm_%d%d), %d SMs, %d-bit memory at %.0f MHz: peak %.1f GB/s\n",
              properties.name, properties.major, properties.minor, info->sms, info->bus_bits,
              info->clock_khz / 1e3, info->peak_bytes_per_s / 1e9);
  status = RunKernelRows(*info, bytes, runs);
  if (status.ok()) status = RunHostRows(bytes, host_runs);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringsync::Main();
}
