// What the collective sweeps in bench/ share so that their tables line up row by row
// (bench/compare_with_gloo.sh joins them): size parsing, the iteration budget, busbw's
// factor, and the nccl-tests-style columns size, count, type, redop, time, algbw, busbw,
// #wrong.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace ringsync::bench {

// The bytes each rank moves on a ring per byte of a collective's result (busbw / algbw), as
// nccl-tests counts them, for `collective` named as ringsync-bench --collective names it:
// 2(N-1)/N for an all-reduce, 1 for a broadcast, (N-1)/N for an all-gather or a gather
// (whose size is the whole result), a reduce-scatter or a scatter (the whole input) and an
// all-to-all (each rank's input, which is also its output's size: all but its own block
// leaves, alltoall_perf's factor); for the uneven all-to-all below, what leaves of its
// input, 1 - 2/(N(N+1)).
struct BusFactor {
  const char* formula;  // as the tables' heading line prints it
  double value;
};
inline BusFactor BusFactorOf(absl::string_view collective, int nranks) {
  const double n = nranks;
  if (collective == "alltoallv") return {"1-2/(N(N+1))", 1 - 2 / (n * (n + 1))};
  if (collective == "broadcast") return {"1", 1.0};
  if (collective == "allgather" || collective == "reducescatter" || collective == "scatter" ||
      collective == "gather" || collective == "alltoall") {
    return {"(N-1)/N", (n - 1) / n};
  }
  return {"2(N-1)/N", 2 * (n - 1) / n};
}

// The uneven all-to-all the benchmarks time (--collective=alltoallv, a mixture-of-experts
// dispatch's shape): rank q sends rank r AllToAllVUnits(q, r, N) = 1 + (r - q) mod N
// shares of count / (N(N+1)/2) elements, so its own block is the smallest, the blocks to
// the ranks after it grow, and every rank sends and receives `count` elements in all (the
// shares of each row and each column add up to N(N+1)/2). `count`: a multiple of that.
inline int64_t AllToAllVShares(int nranks) { return int64_t{nranks} * (nranks + 1) / 2; }
inline int64_t AllToAllVUnits(int from, int to, int nranks) {
  return 1 + ((to - from) % nranks + nranks) % nranks;
}
// Elements rank `from` sends each rank (its send counts; a column of them, `to` fixed, is
// what `to` receives from each rank).
inline std::vector<uint64_t> AllToAllVCounts(int from, int nranks, uint64_t count) {
  std::vector<uint64_t> counts;
  const uint64_t share = count / static_cast<uint64_t>(AllToAllVShares(nranks));
  for (int to = 0; to < nranks; ++to) {
    counts.push_back(share * static_cast<uint64_t>(AllToAllVUnits(from, to, nranks)));
  }
  return counts;
}
inline std::vector<uint64_t> AllToAllVReceiveCounts(int to, int nranks, uint64_t count) {
  std::vector<uint64_t> counts;
  const uint64_t share = count / static_cast<uint64_t>(AllToAllVShares(nranks));
  for (int from = 0; from < nranks; ++from) {
    counts.push_back(share * static_cast<uint64_t>(AllToAllVUnits(from, to, nranks)));
  }
  return counts;
}

// Large sizes get fewer iterations so a sweep to 256 MiB ends in minutes: at most this
// many bytes per size for the timed batch, and again for the warm-up (never below 2 / 1).
inline constexpr int64_t kBytesPerBatch = int64_t{1} << 30;

// "4", "64K", "256M", "1G" (an optional B or iB after the unit); -1 if malformed or
// outside 1 B..1 TiB.
inline int64_t ParseSize(absl::string_view text) {
  std::string s = absl::AsciiStrToUpper(text);
  if (absl::EndsWith(s, "IB")) s.resize(s.size() - 2);
  else if (absl::EndsWith(s, "B")) s.pop_back();
  int shift = 0;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    shift = s.back() == 'K' ? 10 : s.back() == 'M' ? 20 : 30;
    s.pop_back();
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(s, &value) || value < 1 || value > (int64_t{1} << (40 - shift))) return -1;
  return value << shift;
}

struct Iterations {
  int64_t timed, warmup;
};
// The timed and warm-up iterations for one size, capped by kBytesPerBatch.
inline Iterations IterationsFor(int64_t bytes, int64_t iters, int64_t warmup_iters) {
  const int64_t budget = std::max<int64_t>(1, kBytesPerBatch / std::max<int64_t>(1, bytes));
  return {std::max<int64_t>(2, std::min(iters, budget)), std::min(warmup_iters, budget)};
}

// The two column-heading lines, after a bench's own '#' lines.
inline void PrintColumnHeads() {
  std::printf("#%11s  %12s  %8s  %6s  %10s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
              "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %10s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "(us)",
              "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

// One row: `seconds` per all-reduce of `bytes`; busbw = algbw * `bus_factor` (2(N-1)/N).
inline void PrintRow(int64_t bytes, int64_t count, absl::string_view type, absl::string_view op,
                     double seconds, double bus_factor, int64_t wrong) {
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  std::printf("%12lld  %12lld  %8s  %6s  %10.1f  %7.3f  %7.3f  %6lld\n",
              static_cast<long long>(bytes), static_cast<long long>(count),
              std::string(type).c_str(), std::string(op).c_str(), seconds * 1e6, algbw,
              algbw * bus_factor, static_cast<long long>(wrong));
  std::fflush(stdout);
}

}  // namespace ringsync::bench
