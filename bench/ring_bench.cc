// In-process ring all-reduce: N ranks as threads over in-memory links, float32 SUM.
// Reports nccl-tests' figures as counters: algbw = S / t, busbw = algbw * 2(N-1)/N.
// The in-memory link copies every payload once (its "wire"), so this measures the
// algorithm, pipeline and reducer, not a network.
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allreduce.h"
#include "core/testing/spawn_ranks.h"

namespace ringsync {
namespace {

void BM_InProcessRingAllReduce(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const size_t bytes = static_cast<size_t>(state.range(1));
  const size_t count = bytes / sizeof(float);
  std::vector<std::vector<float>> buffers(n, std::vector<float>(count, 1.0f));
  MemoryRing ring(n);
  RingOptions options;
  options.segment_bytes = size_t{1} << 20;
  options.timeout = absl::Minutes(5);
  uint64_t sequence = 0;
  for (auto _ : state) {
    CollectiveSpec spec;
    spec.name = "bench";
    spec.sequence = ++sequence;
    spec.count = count;
    std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
      CpuReducer reducer;
      auto span = absl::MakeSpan(reinterpret_cast<std::byte*>(buffers[rank].data()), bytes);
      return RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, spec, span, options);
    });
    for (const absl::Status& s : statuses) {
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    }
  }
  const double total = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["algbw_GBps"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.counters["busbw_GBps"] = benchmark::Counter(total / 1e9 * 2.0 * (n - 1) / n,
                                                    benchmark::Counter::kIsRate);
  state.SetLabel("float32 sum");
}

BENCHMARK(BM_InProcessRingAllReduce)
    ->ArgNames({"N", "bytes"})
    ->Args({4, 1 << 20})
    ->Args({4, 16 << 20})
    ->Args({4, 64 << 20})
    ->Args({4, 256 << 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace
}  // namespace ringsync

BENCHMARK_MAIN();
