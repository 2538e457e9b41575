// What the peer benchmarks that bench/compare_with_gloo.sh runs next to ringsync-bench
// (gloo-peer-bench, mpi-peer-bench, grpc-ring-bench) share, so that one command line
// drives all of them and their rows line up with ringsync's: the sweep flags, the sizes
// they expand to, ringsync-bench's inputs and exact expected results, and the timed,
// checked sweep itself over a peer library's collectives.
//
// Flags (defined once in peer_sweep.cc for every binary that links it): --collective,
// --min_bytes, --max_bytes, --step_factor, --iters, --warmup_iters, --dtype, --op, --check.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_table.h"

namespace ringsync::bench {

struct PeerSweep {
  int64_t min_bytes, max_bytes, step_factor, iters, warmup_iters;
  std::string dtype;  // float32, float64, int32 or int64
  std::string op;     // sum, min or max
  bool check;         // check one collective of known inputs per size
  // allreduce, broadcast (from rank 0), allgather (a size is its whole result, N blocks),
  // scatter (from rank 0; a size is the root's input, N blocks), gather (to rank 0; a
  // size is the root's result, N blocks), alltoall (a size is each rank's input, N
  // blocks), reducescatter (a size is each rank's input, N blocks; rank r keeps block r
  // of the reduction) or alltoallv (uneven blocks, bench_table.h's AllToAllVCounts; a size
  // is each rank's input and output, N(N+1)/2 shares), as ringsync-bench --collective.
  std::string collective = "allreduce";
};

// The sweep the flags ask for; nullopt (after printing why, prefixed by `program`, on
// stderr) if a size is malformed, min > max, step_factor < 2, iters < 1, warmup_iters < 0,
// or dtype / op / collective is not one the peers implement.
std::optional<PeerSweep> ReadPeerSweep(const char* program);

// The element counts of the sweep's rows for elements of `element_size` bytes:
// min_bytes, min_bytes * step_factor, ... up to max_bytes, each at least one element,
// a count already listed skipped (sizes below one element).
std::vector<size_t> SweepCounts(const PeerSweep& sweep, size_t element_size);

// Rank r's element i: ringsync-bench's inputs for sum, min and max. Small integers in
// -2..2, so a sum over up to 64 ranks is exact in every dtype and in any order.
inline int64_t InputValue(int rank, size_t i) {
  return static_cast<int64_t>((i + 3 * static_cast<size_t>(rank)) % 5) - 2;
}

// Writes rank `rank`'s inputs into data[0, count).
template <typename T>
void FillInputs(T* data, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(InputValue(rank, i));
}

// How many of data[0, count) differ from rank `rank`'s inputs from element `first` on (a
// broadcast's root's, an all-gather's block of that rank, a scatter's block of the root's).
template <typename T>
int64_t CountNotFrom(const T* data, size_t count, int rank, size_t first = 0) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    wrong += data[i] != static_cast<T>(InputValue(rank, first + i));
  }
  return wrong;
}

// The rank whose inputs, from the block's first element, fill the all-to-all block that
// rank `from` sends rank `to`, as in ringsync-bench (its ExchangedBlock, which runs in
// place): a block that did not arrive, to's own block for `from`, then differs from the
// one expected there at any block length, up to N = 5 everywhere.
inline int ExchangedBlockRank(int from, int to) { return from + 2 * to; }

// How many of data[0, count) differ from the all-reduce (`op`) of `nranks` ranks' inputs
// from element `first` on (a reduce-scatter's block of it).
template <typename T>
int64_t CountWrong(const T* data, size_t count, int nranks, const std::string& op, size_t first = 0) {
  constexpr size_t kPeriod = 15;  // InputValue repeats with this period in i (and 5 in r)
  T expected[kPeriod];
  for (size_t i = 0; i < kPeriod; ++i) {
    T sum = 0, min = static_cast<T>(InputValue(0, i)), max = min;
    for (int r = 0; r < nranks; ++r) {
      const T v = static_cast<T>(InputValue(r, i));
      sum += v;
      min = std::min(min, v);
      max = std::max(max, v);
    }
    expected[i] = op == "min" ? min : op == "max" ? max : sum;
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += data[i] != expected[(first + i) % kPeriod];
  return wrong;
}

// This process's peak resident set so far (getrusage), MiB.
double PeakRssMiB();

// What a peer library lends the sweep: its all-reduce of `count` elements of T in place
// with the sweep's op, its broadcast of rank 0's `count` elements in place, its
// all-gather of each rank's `count` elements into N x count, its scatter of rank 0's
// N x `count` elements, block r into rank r's output, its gather of each rank's
// `count` elements into rank 0's N x count, and its all-to-all of each rank's N x `count`
// elements, block r to rank r, whose output's block q is rank q's, its uneven all-to-all
// of `send_counts` elements to each rank from `input`, `receive_counts` from each into
// `output` (rank order, end to end), and its reduce-scatter
// of each rank's N x `count` elements of `data` with the sweep's op, which returns where
// it left this rank's `count` elements of the reduction (Gloo and MPI reduce in place and
// leave them at data's start) (any but the all-reduce may be empty: the peer has none), a
// barrier, and one scalar's max and sum over all ranks (every rank gets the result). Each
// is called by every rank in the same order.
template <typename T>
struct PeerCollectives {
  std::function<void(T* data, size_t count)> all_reduce;
  std::function<void(T* data, size_t count)> broadcast;
  std::function<void(const T* input, size_t count, T* output)> all_gather;
  std::function<void(const T* input, size_t count, T* output)> scatter;
  std::function<void(const T* input, size_t count, T* output)> gather;
  std::function<void(const T* input, size_t count, T* output)> all_to_all;
  std::function<T*(T* data, size_t count)> reduce_scatter;
  std::function<void(const T* input, const std::vector<uint64_t>& send_counts, T* output,
                     const std::vector<uint64_t>& receive_counts)>
      all_to_all_v;
  std::function<void()> barrier;
  std::function<double(double)> max_over_ranks;
  std::function<int64_t(int64_t)> sum_over_ranks;
};

// One rank's sweep over `sweep`'s sizes with the peer's collective: per size the warm-up,
// a barrier, the timed batch (time = max over ranks of batch time / iters), then, if
// sweep.check, one collective of known inputs whose wrong elements are summed over ranks.
// An all-gather's or a gather's sizes are whole results, a scatter's the root's input, an
// all-to-all's or a reduce-scatter's each rank's input, each rounded down to N blocks. Rank 0 prints how
// time and bandwidth are measured, the column heads, a row per size and the verdict lines
// (`who` names the peer in the RSS line), after the bench's own first '#' line.
// Returns the wrong elements over all ranks and sizes (the same on every rank); -1 if
// the peer has not got the collective.
template <typename T>
int64_t RunSweep(const PeerSweep& sweep, int rank, int nranks, const PeerCollectives<T>& peer,
                 const char* who) {
  const bool print = rank == 0;
  const bool reduces = sweep.collective == "allreduce";
  const bool reduce_scatters = sweep.collective == "reducescatter";
  const bool exchanges_uneven = sweep.collective == "alltoallv";
  const bool to_root = sweep.collective == "gather";
  const bool gathers = sweep.collective == "allgather" || to_root;
  const bool broadcasts = sweep.collective == "broadcast";
  const bool scatters = sweep.collective == "scatter";
  const bool exchanges = sweep.collective == "alltoall";
  if ((gathers && !(to_root ? peer.gather : peer.all_gather)) ||
      (broadcasts && !peer.broadcast) || (scatters && !peer.scatter) ||
      (exchanges && !peer.all_to_all) || (reduce_scatters && !peer.reduce_scatter) ||
      (exchanges_uneven && !peer.all_to_all_v)) {
    if (print) std::fprintf(stderr, "%s: no %s in this peer\n", who, sweep.collective.c_str());
    return -1;
  }
  std::vector<size_t> counts;
  for (size_t count : SweepCounts(sweep, sizeof(T))) {
    if (gathers || scatters || exchanges || reduce_scatters) {
      count = std::max<size_t>(1, count / nranks) * nranks;
    }
    if (exchanges_uneven) {
      const auto shares = static_cast<size_t>(AllToAllVShares(nranks));
      count = std::max<size_t>(1, count / shares) * shares;
    }
    if (counts.empty() || counts.back() != count) counts.push_back(count);
  }
  std::vector<T> buffer(counts.back());
  // An all-gather's or a gather's input, a scatter's output: one block; an all-to-all's
  // input: N blocks (the peers' all-to-alls take an input and an output).
  std::vector<T> input(exchanges || exchanges_uneven ? counts.back()
                       : gathers || scatters ? counts.back() / nranks
                                             : 0);
  T* reduced = nullptr;  // where the peer's reduce-scatter left this rank's block
  std::vector<uint64_t> sends, receives;  // the uneven all-to-all's, of the size at hand
  const auto run = [&](size_t count) {
    if (exchanges_uneven) return peer.all_to_all_v(input.data(), sends, buffer.data(), receives);
    if (reduce_scatters) {
      reduced = peer.reduce_scatter(buffer.data(), count / nranks);
      return;
    }
    if (exchanges) return peer.all_to_all(input.data(), count / nranks, buffer.data());
    if (to_root) return peer.gather(input.data(), count / nranks, buffer.data());
    if (gathers) return peer.all_gather(input.data(), count / nranks, buffer.data());
    if (scatters) return peer.scatter(buffer.data(), count / nranks, input.data());
    if (broadcasts) return peer.broadcast(buffer.data(), count);
    peer.all_reduce(buffer.data(), count);
  };
  const auto fill = [&](size_t count) {
    if (gathers) return FillInputs(input.data(), count / nranks, rank);
    if (exchanges_uneven) {
      size_t at = 0;
      for (int to = 0; to < nranks; ++to) {
        FillInputs(input.data() + at, sends[to], ExchangedBlockRank(rank, to));
        at += sends[to];
      }
      std::fill_n(buffer.data(), count, static_cast<T>(-3));  // what no rank sends
      return;
    }
    if (scatters) FillInputs(input.data(), count / nranks, rank + 1);  // shows a miss
    if (exchanges) {
      const size_t block = count / nranks;
      for (int to = 0; to < nranks; ++to) {
        FillInputs(input.data() + to * block, block, ExchangedBlockRank(rank, to));
      }
      // No rank sends -3, so every element that does not arrive shows (the timed batch
      // left the right values in the output).
      std::fill_n(buffer.data(), count, static_cast<T>(-3));
      return;
    }
    FillInputs(buffer.data(), count, rank);
  };
  const auto count_wrong = [&](size_t count) -> int64_t {
    if (reduces) return CountWrong(buffer.data(), count, nranks, sweep.op);
    if (reduce_scatters) {
      const size_t block = count / nranks;
      return CountWrong(reduced, block, nranks, sweep.op, static_cast<size_t>(rank) * block);
    }
    if (exchanges_uneven) {
      int64_t wrong = 0;
      size_t at = 0;
      for (int from = 0; from < nranks; ++from) {
        wrong += CountNotFrom(buffer.data() + at, receives[from], ExchangedBlockRank(from, rank));
        at += receives[from];
      }
      return wrong;
    }
    if (broadcasts) return CountNotFrom(buffer.data(), count, 0);
    if (scatters) {
      const size_t block = count / nranks;
      return CountNotFrom(input.data(), block, 0, static_cast<size_t>(rank) * block);
    }
    int64_t wrong = 0;
    const size_t block = count / nranks;
    if (exchanges) {
      for (int from = 0; from < nranks; ++from) {
        wrong += CountNotFrom(buffer.data() + from * block, block, ExchangedBlockRank(from, rank));
      }
      return wrong;
    }
    if (to_root && rank != 0) return wrong;  // only the root has a result
    for (int r = 0; r < nranks; ++r) wrong += CountNotFrom(buffer.data() + r * block, block, r);
    return wrong;
  };
  const BusFactor bus_factor = BusFactorOf(sweep.collective, nranks);
  const double bus = bus_factor.value;
  if (print) {
    std::printf("# time = max over ranks of (batch wall time / iters); algbw = size / time; "
                "busbw = algbw * %s = algbw * %.3f\n#\n", bus_factor.formula, bus);
    PrintColumnHeads();
  }
  int64_t total_wrong = 0;
  for (size_t count : counts) {
    if (exchanges_uneven) {  // once a size, not in the timed loop
      sends = AllToAllVCounts(rank, nranks, count);
      receives = AllToAllVReceiveCounts(rank, nranks, count);
    }
    const int64_t bytes = static_cast<int64_t>(count * sizeof(T));
    const auto [iters, warmups] = IterationsFor(bytes, sweep.iters, sweep.warmup_iters);
    fill(count);
    for (int64_t i = 0; i < warmups; ++i) run(count);
    peer.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i) run(count);
    const std::chrono::duration<double> batch = std::chrono::steady_clock::now() - start;
    const double seconds = peer.max_over_ranks(batch.count() / static_cast<double>(iters));
    int64_t wrong = 0;
    if (sweep.check) {
      fill(count);
      run(count);
      wrong = count_wrong(count);
    }
    wrong = peer.sum_over_ranks(wrong);
    total_wrong += wrong;
    if (print) {
      PrintRow(bytes, static_cast<int64_t>(count), sweep.dtype,
               reduces || reduce_scatters ? sweep.op : "none",
               seconds, bus, wrong);
    }
  }
  const double peak_mib = peer.max_over_ranks(PeakRssMiB());
  if (print) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong),
                total_wrong ? "FAILED" : "OK");
    std::printf("# %s rank peak RSS (max over ranks), MiB: %.1f\n", who, peak_mib);
    std::fflush(stdout);
  }
  return total_wrong;
}

}  // namespace ringsync::bench
