// ring_demo: the ring all-reduce in one process, N ranks as threads over in-memory
// links. Shows the seed's case and a large random tensor checked against a reference.
#include <cstdio>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/reduce/cpu_reducer.h"
#include "core/link/memory_link.h"
#include "core/ring/ring_allreduce.h"
#include "core/testing/spawn_ranks.h"

ABSL_FLAG(int, ranks, 4, "ranks (threads) in the in-process ring");
ABSL_FLAG(int64_t, elements, 16 << 20, "float32 elements of the large tensor");

namespace ringsync {
namespace {

absl::Status AllReduce(std::vector<std::vector<float>>& buffers, uint64_t sequence,
                       const std::string& name, RingStats* rank0_stats) {
  const int n = static_cast<int>(buffers.size());
  MemoryRing ring(n);
  CollectiveSpec spec;
  spec.name = name;
  spec.sequence = sequence;
  spec.count = buffers[0].size();
  std::vector<RingStats> stats(n);
  std::vector<absl::Status> statuses = SpawnRanks(n, [&](int rank) {
    CpuReducer reducer;
    auto span = absl::MakeSpan(reinterpret_cast<std::byte*>(buffers[rank].data()),
                               buffers[rank].size() * sizeof(float));
    return RingAllReduce(RingMember{rank, n, 0}, ring.link(rank), reducer, spec, span,
                         RingOptions{}, &stats[rank]);
  });
  *rank0_stats = stats[0];
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

int Run() {
  RingStats stats;
  std::vector<std::vector<float>> seed = {{1, 2, 3, 4}, {2, 2, 2, 2}, {0, 1, 0, 1}, {1, 1, 1, 1}};
  for (size_t r = 0; r < seed.size(); ++r) {
    std::printf("rank %zu holds [%s]\n", r, absl::StrJoin(seed[r], ", ").c_str());
  }
  if (absl::Status s = AllReduce(seed, 1, "seed", &stats); !s.ok()) {
    std::fprintf(stderr, "seed all-reduce failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  for (size_t r = 0; r < seed.size(); ++r) {
    std::printf("after all-reduce(sum) rank %zu holds [%s]\n", r, absl::StrJoin(seed[r], ", ").c_str());
  }

  const int n = absl::GetFlag(FLAGS_ranks);
  const size_t count = static_cast<size_t>(absl::GetFlag(FLAGS_elements));
  std::vector<std::vector<float>> tensors(n, std::vector<float>(count));
  std::vector<float> expected(count, 0.0f);
  std::mt19937 rng(42);
  // Small integers keep float32 sums exact, so any order of combination must match.
  for (auto& t : tensors) {
    for (size_t i = 0; i < count; ++i) t[i] = static_cast<float>(static_cast<int>(rng() % 201) - 100);
  }
  for (const auto& t : tensors) {
    for (size_t i = 0; i < count; ++i) expected[i] += t[i];
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = AllReduce(tensors, 2, "large", &stats); !s.ok()) {
    std::fprintf(stderr, "large all-reduce failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  size_t wrong = 0;
  for (const auto& t : tensors) {
    for (size_t i = 0; i < count; ++i) wrong += t[i] != expected[i];
  }
  const double bytes = static_cast<double>(count) * sizeof(float);
  std::printf("all-reduce of %zu x float32 (%.1f MiB) over %d in-process ranks: %.3f s, "
              "algbw %.2f GB/s, busbw %.2f GB/s, rank 0 sent %llu bytes (2(N-1)/N x S = %.0f), "
              "%zu wrong elements\n",
              count, bytes / (1 << 20), n, seconds, bytes / seconds / 1e9,
              bytes / seconds / 1e9 * 2.0 * (n - 1) / n,
              static_cast<unsigned long long>(stats.bytes_sent), bytes * 2.0 * (n - 1) / n, wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs the ring all-reduce in one process and checks the result.");
  absl::ParseCommandLine(argc, argv);
  return ringsync::Run();
}
