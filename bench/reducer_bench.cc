// CpuReducer::Combine throughput next to memcpy, measured in the same run.
//
// Unit: bytes touched per second, with S = count x element size = one buffer:
//   Combine touches 3 x S (read dst, read src, write dst);
//   memcpy  touches 2 x S (read src, write dst) copying a buffer of the same S.
// The ratio reducer/memcpy says how close Combine comes to merely moving the bytes it
// must move. Targets: float32 SUM >= 0.8; float16 and bfloat16 SUM >= 0.5.
// Sizes: 256 KiB per buffer (cache resident) and 64 MiB (main memory). Each case runs
// 3 times; the console shows the median, the ratio table the best of the three.
//
//   build/bin/reducer_bench                      # all cases, then the ratio table
//   build/bin/reducer_bench --benchmark_filter=float16
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/half.h"
#include "core/reduce/cpu_reducer.h"

namespace ringsync {
namespace {

constexpr size_t kSizes[] = {256 << 10, 64 << 20};

std::string SizeName(size_t bytes) {
  return bytes >= (1 << 20) ? absl::StrCat(bytes >> 20, "MiB") : absl::StrCat(bytes >> 10, "KiB");
}

// Buffers are allocated once per size and refilled per case, outside the timed loop.
struct Buffers {
  std::unique_ptr<uint8_t[]> dst, src;
};
Buffers& BuffersFor(size_t bytes) {
  static std::map<size_t, Buffers> all;
  Buffers& b = all[bytes];
  if (!b.dst) {
    b.dst = std::make_unique<uint8_t[]>(bytes);  // value-initialized: pages are touched
    b.src = std::make_unique<uint8_t[]>(bytes);
  }
  return b;
}

// dst in [1, 2), src in +-[0, 2^-10): repeated combining drifts dst slowly and never
// overflows, so the rare overflow path stays as rare as in real gradients.
void Fill(DType dtype, uint8_t* dst, uint8_t* src, size_t count) {
  uint32_t state = 12345;
  auto next = [&state] { return (state = state * 1664525u + 1013904223u) >> 8; };  // 24 bits
  for (size_t i = 0; i < count; ++i) {
    const float d = 1.0f + static_cast<float>(next()) * 0x1p-24f;
    const float s = (static_cast<float>(next()) * 0x1p-24f - 0.5f) * 0x1p-9f;
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(dst + 4 * i, &d, 4), std::memcpy(src + 4 * i, &s, 4);
        break;
      case DType::kFloat64: {
        const double dd = d, ds = s;
        std::memcpy(dst + 8 * i, &dd, 8), std::memcpy(src + 8 * i, &ds, 8);
        break;
      }
      case DType::kFloat16:
      case DType::kBFloat16: {
        const bool f16 = dtype == DType::kFloat16;
        const uint16_t hd = f16 ? FloatToFloat16(d) : FloatToBFloat16(d);
        const uint16_t hs = f16 ? FloatToFloat16(s) : FloatToBFloat16(s);
        std::memcpy(dst + 2 * i, &hd, 2), std::memcpy(src + 2 * i, &hs, 2);
        break;
      }
      default: {  // integers: arbitrary bits; SUM wraps
        const uint32_t a = next(), b = next();
        std::memcpy(dst + i * DTypeSize(dtype), &a, DTypeSize(dtype));
        std::memcpy(src + i * DTypeSize(dtype), &b, DTypeSize(dtype));
      }
    }
  }
}

struct Case {
  std::string label;  // "float32 sum", "memcpy", ...
  size_t bytes;
};
std::map<std::string, Case>& Cases() {  // benchmark name -> what it measured
  static std::map<std::string, Case> cases;
  return cases;
}

void BM_Combine(benchmark::State& state, CpuReducer::Isa isa, DType dtype, ReduceOp op,
                size_t bytes) {
  CpuReducer reducer(isa);
  Buffers& b = BuffersFor(bytes);
  const size_t count = bytes / DTypeSize(dtype);
  Fill(dtype, b.dst.get(), b.src.get(), count);
  const ReduceSpec spec{dtype, op, /*world_size=*/4};
  ReduceStats stats;
  for (auto _ : state) {
    const absl::Status s = reducer.Combine(spec, b.dst.get(), b.src.get(), count, &stats);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 *
                          static_cast<int64_t>(bytes));
  state.SetLabel(std::string(reducer.isa()));
  if (stats.overflows != 0) state.SkipWithError("unexpected overflows: the data drifted");
}

void BM_Memcpy(benchmark::State& state, size_t bytes) {
  Buffers& b = BuffersFor(bytes);
  for (auto _ : state) {
    std::memcpy(b.dst.get(), b.src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(bytes));
}

void RegisterAll() {
  struct Op {
    CpuReducer::Isa isa;
    DType dtype;
    ReduceOp op;
  };
  using I = CpuReducer::Isa;
  const Op ops[] = {
      {I::kBest, DType::kFloat32, ReduceOp::kSum},
      {I::kBest, DType::kFloat32, ReduceOp::kAvg},
      {I::kBest, DType::kFloat32, ReduceOp::kMax},
      {I::kBest, DType::kFloat16, ReduceOp::kSum},
      {I::kBest, DType::kBFloat16, ReduceOp::kSum},
      {I::kBest, DType::kFloat64, ReduceOp::kSum},
      {I::kBest, DType::kInt32, ReduceOp::kSum},
      {I::kBest, DType::kFloat16, ReduceOp::kMax},
      // What CPUs without AVX-512 (bfloat16 differs) or without AVX2 get.
      {I::kAvx2, DType::kBFloat16, ReduceOp::kSum},
      {I::kPortable, DType::kFloat32, ReduceOp::kSum},
      {I::kPortable, DType::kFloat16, ReduceOp::kSum},
  };
  // Best of 3 short repetitions: other work on a shared machine only ever slows a run
  // down, so the fastest repetition is the least disturbed measurement.
  const auto configure = [](benchmark::internal::Benchmark* b) {
    b->Repetitions(3)->MinTime(0.15);
  };
  for (size_t bytes : kSizes) {
    const std::string memcpy_name = absl::StrCat("Memcpy/", SizeName(bytes));
    configure(benchmark::RegisterBenchmark(memcpy_name.c_str(), BM_Memcpy, bytes));
    Cases()[memcpy_name] = {"memcpy", bytes};
    for (const Op& o : ops) {
      if (o.isa == I::kPortable && bytes > (1 << 20)) continue;  // slow, and says nothing new
      const char* isa = o.isa == I::kBest ? "cpu" : o.isa == I::kAvx2 ? "cpu_avx2" : "cpu_portable";
      const std::string name = absl::StrCat("Combine/", isa, "/", DTypeName(o.dtype), "/",
                                            ReduceOpName(o.op), "/", SizeName(bytes));
      configure(
          benchmark::RegisterBenchmark(name.c_str(), BM_Combine, o.isa, o.dtype, o.op, bytes));
      Cases()[name] = {absl::StrCat(isa, " ", DTypeName(o.dtype), " ", ReduceOpName(o.op)), bytes};
    }
  }
}

// Prints one console line per case (the median repetition) and remembers each case's
// best bytes touched per second for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> shown;
    for (const Run& run : runs) {
      if (run.error_occurred) {
        shown.push_back(run);
        continue;
      }
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") shown.push_back(run);
        continue;
      }
      const auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      double& best = best_[run.run_name.function_name];
      best = std::max(best, it->second.value);
    }
    if (shown.empty()) shown = runs;  // run with --benchmark_repetitions=1
    ConsoleReporter::ReportRuns(shown);
  }

  void PrintRatios() const {
    std::printf(
        "\nCombine vs memcpy, best of the repetitions, in bytes touched per second (Combine 3 x "
        "S:\n"
        "read dst + read src +"
        " write dst;\nmemcpy 2 x S: read src + write dst; S = one buffer of the size shown)."
        " Targets: float32 sum >= 0.8, float16/bfloat16 sum >= 0.5.\n\n");
    std::printf("%-28s %8s %14s %14s %7s %s\n", "case", "size", "Combine GB/s", "memcpy GB/s",
                "ratio", "target");
    for (const auto& [name, c] : Cases()) {
      const auto mine = best_.find(name);
      const auto base = best_.find(absl::StrCat("Memcpy/", SizeName(c.bytes)));
      if (c.label == "memcpy" || mine == best_.end() || base == best_.end()) continue;
      const double ratio = mine->second / base->second;
      double target = 0;
      if (c.label == "cpu float32 sum") target = 0.8;
      if (c.label == "cpu float16 sum" || c.label == "cpu bfloat16 sum") target = 0.5;
      const std::string verdict =
          target == 0 ? "" : absl::StrCat(ratio >= target ? "ok" : "BELOW", " (>= ", target, ")");
      std::printf("%-28s %8s %14.2f %14.2f %7.2f %s\n", c.label.c_str(), SizeName(c.bytes).c_str(),
                  mine->second / 1e9, base->second / 1e9, ratio, verdict.c_str());
    }
  }

 private:
  std::map<std::string, double> best_;
};

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ringsync::RegisterAll();
  std::printf("CpuReducer kernels on this CPU: %s\n",
              std::string(ringsync::CpuReducer().isa()).c_str());
  ringsync::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
