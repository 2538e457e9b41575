// ringsync-bench: collective latency and bandwidth through the SDK, like nccl-tests'
// all_reduce_perf (broadcast_perf, all_gather_perf, reduce_scatter_perf, scatter_perf,
// gather_perf, alltoall_perf with --collective).
// Start one process per rank, each with --worker naming its own worker:
//
//   ringsync-bench --worker=unix:/tmp/ringsync-cluster-XXXX/w0.sock --max_bytes=64M &
//   ... one per worker ...
//
// For each size: warm-up collectives, a Barrier, then a timed batch; a rank's time is
// batch wall time / iterations, and the reported time is the MAX over ranks (all-reduced
// through ringsync itself), as nccl-tests reports it. algbw = size / time and busbw =
// algbw * the bytes each rank must move on a ring per byte of result, in GB/s = 1e9 B/s:
// 2(N-1)/N for an all-reduce, 1 for a broadcast, (N-1)/N for an all-gather or a gather
// (to rank 0), whose size is its whole result (N blocks, one from each rank), and for a
// reduce-scatter or a scatter (from rank 0), whose size is its whole input (N blocks, one
// for each rank), and for an all-to-all, whose size is each rank's input, which is also
// its output (N blocks, one for each rank), as in nccl-tests. (ringsync's
// reduce-scatter moves S per rank, not the (N-1)/N x S busbw counts: see client.h.)
//
// Checking: the timed batch reduces its own results again and again (values run off to
// inf), so, as in nccl-tests, one more collective per size runs on fresh inputs and is
// compared element by element with the exact expected value. Inputs are small integers
// (see InputValue) so every op's result is exact in every dtype and independent of the
// order in which the ring combines: float16 sums stay exact up to N = 1024, bfloat16 up
// to N = 128. A broadcast's root is rank 0; an all-gather's rank r sends its own input
// (a separate buffer) as block r; a reduce-scatter's rank r receives block r into a
// separate buffer. An all-to-all runs in place (input = output: the form in which a
// registered buffer needs no copy), so its inputs are chosen to tell a block that arrived
// from the one it replaces (SizedCollective::ExchangedBlock). #wrong is summed over ranks;
// any #wrong > 0 makes the exit status 1.
//
// The SDK does not report CollectiveResponse.bytes_sent, so the per-rank ring traffic
// printed at the end is the schedule's 2(N-1)/N * size, not a measurement.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_table.h"
#include "core/collective.h"
#include "core/half.h"
#include "daemon/process/help_filter.h"
#include "ringsync/client.h"

ABSL_FLAG(std::string, collective, "allreduce",
          "allreduce, broadcast (from rank 0), allgather, reducescatter, scatter (from rank 0; "
          "the size is the root's input), gather (to rank 0; the size is the root's result), "
          "alltoall (in place; the size is each rank's input) or alltoallv (uneven blocks, "
          "from an input into an output: bench/bench_table.h's AllToAllVCounts; the size is "
          "each rank's input, and its output)");
ABSL_FLAG(std::string, worker, "", "this rank's worker: unix:/path, /path or host:port (required)");
ABSL_FLAG(std::string, min_bytes, "4", "smallest size; K, M, G suffixes mean KiB, MiB, GiB");
ABSL_FLAG(std::string, max_bytes, "256M", "largest size; K, M, G suffixes mean KiB, MiB, GiB");
ABSL_FLAG(int64_t, step_factor, 2, "each size is the previous one times this (>= 2)");
ABSL_FLAG(std::string, dtype, "float32",
          "float32 float64 float16 bfloat16 int32 int64 int8 uint8");
ABSL_FLAG(std::string, op, "sum", "sum avg min max prod");
ABSL_FLAG(int64_t, iters, 20, "timed collectives per size (fewer for large sizes, see --help)");
ABSL_FLAG(int64_t, warmup_iters, 5, "untimed collectives per size before timing");
ABSL_FLAG(bool, registered, false,
          "the data in a registered buffer (Client::Allocate: the worker runs an "
          "all-reduce, broadcast or all-to-all in place, no copy in or out; an all-gather's "
          "input and a reduce-scatter's result are the rank's own block of it, NCCL's in-place "
          "form; a gather's input and a scatter's result stay plain) instead of plain memory");
ABSL_FLAG(bool, stage_in_registered_memory, true,
          "plain memory: the SDK stages the tensor in registered memory (ClientOptions::"
          "stage_in_registered_memory); false: in a shared-memory file, as before");
ABSL_FLAG(absl::Duration, call_channel_spin, absl::Microseconds(300),
          "how long the SDK looks for an answer in its call channel before it sleeps "
          "(ClientOptions::call_channel_spin; 0: sleeps at once)");
ABSL_FLAG(std::string, shared_memory_threshold, "",
          "tensors of at least this size go through shared memory (ClientOptions::"
          "shared_memory_threshold_bytes; K, M suffixes); empty: the SDK's default");
ABSL_FLAG(int, check, 1, "1: check one result per size against exact expected values");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(60), "wait for the worker and a formed ring");
ABSL_FLAG(absl::Duration, linger, absl::ZeroDuration(),
          "after the results, stay attached this long before exiting, so that the worker's "
          "threads that serve this client can still be read (bench/worker_cpu.sh)");
ABSL_FLAG(std::string, tls_ca, "", "with a host:port --worker: PEM CA for mutual TLS");
ABSL_FLAG(std::string, tls_cert, "", "with a host:port --worker: PEM client certificate");
ABSL_FLAG(std::string, tls_key, "", "with a host:port --worker: PEM key of --tls_cert");
ABSL_FLAG(std::string, token_file, "", "with a host:port --worker: the cluster token file");

#ifndef RINGSYNC_BENCH_BUILD
#define RINGSYNC_BENCH_BUILD "unknown"
#endif

namespace ringsync {
namespace {

// Inputs repeat with this period in the element index (lcm of the 5- and 3-cycles below),
// so the expected result is a table of kPeriod elements.
constexpr size_t kPeriod = 15;

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  const int64_t bytes = bench::ParseSize(text);
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "': expected e.g. 4, 64K, 256M, 1G"));
  }
  return bytes;
}

// Rank r's element i. Small integers: sums, min and max of {-2..2} and products of
// {2, 1, -1} (whose magnitude only grows, so an overflow to inf cannot depend on order)
// are exact in every dtype.
int64_t InputValue(ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProd) {
    static constexpr int64_t kFactors[] = {2, 1, -1};
    return kFactors[(i + rank) % 3];
  }
  return static_cast<int64_t>((i + 3 * static_cast<size_t>(rank)) % 5) - 2;
}

template <typename T>
void Store(T value, std::byte* out) { std::memcpy(out, &value, sizeof(T)); }

// Writes a double that is exact (or an overflow to be rounded to inf) as one element.
void StoreFloat(DType dtype, double value, std::byte* out) {
  switch (dtype) {
    case DType::kFloat64: return Store(value, out);
    case DType::kFloat32: return Store(static_cast<float>(value), out);
    case DType::kFloat16: return Store(FloatToFloat16(static_cast<float>(value)), out);
    default: return Store(FloatToBFloat16(static_cast<float>(value)), out);
  }
}

// The reduction of the ranks' inputs for integer type T, with the reducer's rules:
// SUM and PROD wrap, AVG truncates the wrapped sum.
template <typename T>
T ExpectedInteger(ReduceOp op, int n, size_t i) {
  using U = std::make_unsigned_t<T>;
  U sum = 0, prod = 1;
  T min = static_cast<T>(InputValue(op, 0, i)), max = min;
  for (int r = 0; r < n; ++r) {
    const T v = static_cast<T>(InputValue(op, r, i));
    sum = static_cast<U>(sum + static_cast<U>(v));
    prod = static_cast<U>(prod * static_cast<U>(v));
    min = std::min(min, v);
    max = std::max(max, v);
  }
  switch (op) {
    case ReduceOp::kSum: return static_cast<T>(sum);
    case ReduceOp::kAvg: return static_cast<T>(static_cast<T>(sum) / n);
    case ReduceOp::kMin: return min;
    case ReduceOp::kMax: return max;
    default: return static_cast<T>(prod);
  }
}

double ExpectedFloat(DType dtype, ReduceOp op, int n, size_t i) {
  double sum = 0, prod = 1, min = InputValue(op, 0, i), max = min;
  for (int r = 0; r < n; ++r) {
    const double v = static_cast<double>(InputValue(op, r, i));
    sum += v;
    prod *= v;
    min = std::min(min, v);
    max = std::max(max, v);
  }
  switch (op) {
    case ReduceOp::kSum: return sum;
    // AVG divides in float32 (float64 for float64), then rounds once to the type.
    case ReduceOp::kAvg:
      return dtype == DType::kFloat64 ? sum / n : static_cast<float>(sum) / static_cast<float>(n);
    case ReduceOp::kMin: return min;
    case ReduceOp::kMax: return max;
    default: return prod;
  }
}

// kPeriod elements of rank `rank`'s input (rank >= 0) or of the expected result (rank < 0).
std::vector<std::byte> Pattern(DType dtype, ReduceOp op, int n, int rank) {
  const size_t size = DTypeSize(dtype);
  std::vector<std::byte> out(kPeriod * size);
  for (size_t i = 0; i < kPeriod; ++i) {
    std::byte* e = out.data() + i * size;
    const int64_t in = rank >= 0 ? InputValue(op, rank, i) : 0;
    switch (dtype) {
      case DType::kInt32: Store(rank >= 0 ? static_cast<int32_t>(in) : ExpectedInteger<int32_t>(op, n, i), e); break;
      case DType::kInt64: Store(rank >= 0 ? in : ExpectedInteger<int64_t>(op, n, i), e); break;
      case DType::kInt8: Store(rank >= 0 ? static_cast<int8_t>(in) : ExpectedInteger<int8_t>(op, n, i), e); break;
      case DType::kUInt8: Store(rank >= 0 ? static_cast<uint8_t>(in) : ExpectedInteger<uint8_t>(op, n, i), e); break;
      default: StoreFloat(dtype, rank >= 0 ? static_cast<double>(in) : ExpectedFloat(dtype, op, n, i), e);
    }
  }
  return out;
}

void Fill(std::byte* buffer, size_t bytes, const std::vector<std::byte>& pattern) {
  for (size_t at = 0; at < bytes; at += pattern.size()) {
    std::memcpy(buffer + at, pattern.data(), std::min(pattern.size(), bytes - at));
  }
}

// Elements whose bytes differ from the expected pattern; whole periods compared at once.
int64_t CountWrong(const std::byte* buffer, size_t count, size_t element_size,
                   const std::vector<std::byte>& expected) {
  int64_t wrong = 0;
  for (size_t first = 0; first < count; first += kPeriod) {
    const size_t n = std::min(kPeriod, count - first);
    const std::byte* got = buffer + first * element_size;
    if (std::memcmp(got, expected.data(), n * element_size) == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      wrong += std::memcmp(got + i * element_size, expected.data() + i * element_size, element_size) != 0;
    }
  }
  return wrong;
}

// The collective --collective names, by its name (CollectiveKindName); a barrier carries
// nothing to time.
absl::StatusOr<CollectiveKind> ParseCollective(absl::string_view name) {
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kBroadcast,
                              CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                              CollectiveKind::kScatter, CollectiveKind::kGather,
                              CollectiveKind::kAllToAll}) {
    if (name == CollectiveKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "bad --collective '", name,
      "': expected allreduce, broadcast, allgather, reducescatter, scatter, gather, alltoall "
      "or alltoallv"));
}

struct Config {
  CollectiveKind collective;
  bool uneven;  // alltoallv: an all-to-all of uneven blocks
  int64_t min_bytes, max_bytes, step_factor, iters, warmup_iters;
  DType dtype;
  ReduceOp op;
  bool check;
  std::optional<int64_t> shared_memory_threshold;  // the SDK's default when empty
};

absl::StatusOr<Config> ReadFlags() {
  Config c;
  absl::StatusOr<int64_t> min = ParseBytes(absl::GetFlag(FLAGS_min_bytes));
  absl::StatusOr<int64_t> max = ParseBytes(absl::GetFlag(FLAGS_max_bytes));
  absl::StatusOr<DType> dtype = ParseDType(absl::GetFlag(FLAGS_dtype));
  absl::StatusOr<ReduceOp> op = ParseReduceOp(absl::GetFlag(FLAGS_op));
  const bool uneven = absl::GetFlag(FLAGS_collective) == "alltoallv";
  absl::StatusOr<CollectiveKind> collective =
      ParseCollective(uneven ? "alltoall" : absl::GetFlag(FLAGS_collective));
  for (const absl::Status& s :
       {min.status(), max.status(), dtype.status(), op.status(), collective.status()}) {
    if (!s.ok()) return s;
  }
  c = {*collective, uneven, *min, *max, absl::GetFlag(FLAGS_step_factor), absl::GetFlag(FLAGS_iters),
       absl::GetFlag(FLAGS_warmup_iters), *dtype, *op, absl::GetFlag(FLAGS_check) != 0,
       std::nullopt};
  if (c.min_bytes > c.max_bytes) return absl::InvalidArgumentError("--min_bytes exceeds --max_bytes");
  if (c.step_factor < 2) return absl::InvalidArgumentError("--step_factor must be >= 2");
  if (c.iters < 1 || c.warmup_iters < 0) {
    return absl::InvalidArgumentError("--iters must be >= 1 and --warmup_iters >= 0");
  }
  if (!absl::GetFlag(FLAGS_shared_memory_threshold).empty()) {
    absl::StatusOr<int64_t> threshold = ParseBytes(absl::GetFlag(FLAGS_shared_memory_threshold));
    if (!threshold.ok()) return threshold.status();
    c.shared_memory_threshold = *threshold;
  }
  return c;
}

// The collective's name in the tables: --collective's.
std::string NameOf(const Config& c) {
  return c.uneven ? "alltoallv" : std::string(CollectiveKindName(c.collective));
}

// Sum (or max) of one value over all ranks, through ringsync itself.
template <typename T>
absl::StatusOr<T> AcrossRanks(Client& client, const std::string& name, T value, ReduceOp op) {
  if (absl::Status s = client.AllReduce(name, absl::MakeSpan(&value, 1), op); !s.ok()) return s;
  return value;
}

struct Row {
  double seconds;       // per collective, max over ranks
  int64_t wrong;        // summed over ranks
  int64_t collectives;  // of this size, by each rank: warm-ups, timed, the check
};

// One size's collective over `count` elements in `whole` (the all-reduce's, broadcast's or
// all-to-all's data, the all-gather's or gather's result, the reduce-scatter's or scatter's
// input, the uneven all-to-all's input) and, for those four, count / N in `block` (the
// gathers' input, the scatters' result), and `count` in `output` (the uneven all-to-all's).
class SizedCollective {
 public:
  SizedCollective(Client& client, const Config& c, std::byte* whole, std::byte* block, size_t count,
                  std::byte* output)
      : client_(client), c_(c), whole_(whole), block_(block), output_(output), count_(count),
        n_(client.world_size()), element_(DTypeSize(c.dtype)) {
    if (c.uneven) {
      send_counts_ = bench::AllToAllVCounts(client.rank(), n_, count);
      receive_counts_ = bench::AllToAllVReceiveCounts(client.rank(), n_, count);
    }
  }

  // This rank's input, fresh: the reduction's operands, the broadcast root's (and, so that
  // a broadcast that did not arrive shows, the other ranks' own) values, the gathered block,
  // the all-to-all's blocks.
  void FillInput() {
    const int rank = client_.rank();
    switch (c_.collective) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kReduceScatter:
        return Fill(whole_, count_ * element_, Pattern(c_.dtype, c_.op, n_, rank));
      case CollectiveKind::kBroadcast:
        return Fill(whole_, count_ * element_, Pattern(c_.dtype, ReduceOp::kSum, n_, rank));
      case CollectiveKind::kScatter:  // the root's input; the others have none
        if (rank == 0) Fill(whole_, count_ * element_, Pattern(c_.dtype, ReduceOp::kSum, n_, 0));
        return Fill(block_, Block() * element_, Pattern(c_.dtype, ReduceOp::kSum, n_, rank + 1));
      case CollectiveKind::kAllGather:
      case CollectiveKind::kGather:
        return Fill(block_, Block() * element_, Pattern(c_.dtype, ReduceOp::kSum, n_, rank));
      case CollectiveKind::kAllToAll:
        if (c_.uneven) {
          size_t at = 0;
          for (int to = 0; to < n_; ++to) {
            Fill(whole_ + at * element_, send_counts_[to] * element_, ExchangedBlock(rank, to));
            at += send_counts_[to];
          }
          // No rank sends these bytes (0x7f.. is no small integer in any dtype): a block
          // that did not arrive shows.
          std::memset(output_, 0x7f, count_ * element_);
          return;
        }
        for (int to = 0; to < n_; ++to) {
          Fill(whole_ + to * Block() * element_, Block() * element_, ExchangedBlock(rank, to));
        }
        return;
      case CollectiveKind::kBarrier: return;  // refused by ParseCollective
    }
  }

  absl::Status Run(const std::string& name) {
    switch (c_.collective) {
      case CollectiveKind::kAllReduce: return client_.AllReduce(name, whole_, count_, c_.dtype, c_.op);
      case CollectiveKind::kBroadcast:
        return client_.Broadcast(name, whole_, count_, c_.dtype, /*root=*/0);
      case CollectiveKind::kAllGather:
        return client_.AllGather(name, block_, Block(), c_.dtype, whole_, count_);
      case CollectiveKind::kReduceScatter:
        return client_.ReduceScatter(name, whole_, count_, c_.dtype, block_, Block(), c_.op);
      case CollectiveKind::kScatter:
        return client_.Scatter(name, client_.rank() == 0 ? whole_ : nullptr, count_, c_.dtype,
                               block_, Block(), /*root=*/0);
      case CollectiveKind::kGather:  // only the root has an output
        return client_.Gather(name, block_, Block(), c_.dtype,
                              client_.rank() == 0 ? whole_ : nullptr, count_, /*root=*/0);
      case CollectiveKind::kAllToAll:
        if (c_.uneven) {
          return client_.AllToAllV(name, whole_, count_, send_counts_, c_.dtype, output_, count_,
                                   receive_counts_);
        }
        return client_.AllToAll(name, whole_, count_, c_.dtype, whole_, count_);
      case CollectiveKind::kBarrier: break;
    }
    return absl::InternalError("unknown collective");
  }

  // Elements of the result that differ from what FillInput on every rank should give.
  int64_t CountWrongResult() const {
    switch (c_.collective) {
      case CollectiveKind::kAllReduce:
        return CountWrong(whole_, count_, element_, Pattern(c_.dtype, c_.op, n_, -1));
      case CollectiveKind::kBroadcast:
        return CountWrong(whole_, count_, element_, Pattern(c_.dtype, ReduceOp::kSum, n_, 0));
      case CollectiveKind::kAllGather:
      case CollectiveKind::kGather: {
        int64_t wrong = 0;
        if (c_.collective == CollectiveKind::kGather && client_.rank() != 0) return wrong;
        for (int r = 0; r < n_; ++r) {
          wrong += CountWrong(whole_ + r * Block() * element_, Block(), element_,
                              Pattern(c_.dtype, ReduceOp::kSum, n_, r));
        }
        return wrong;
      }
      case CollectiveKind::kReduceScatter:
      case CollectiveKind::kScatter: {
        // This rank's block starts at element rank x Block() of the periodic pattern: the
        // reduced one, or the scatter root's.
        std::vector<std::byte> expected = c_.collective == CollectiveKind::kScatter
                                              ? Pattern(c_.dtype, ReduceOp::kSum, n_, 0)
                                              : Pattern(c_.dtype, c_.op, n_, -1);
        const size_t shift = client_.rank() * Block() % kPeriod * element_;
        std::rotate(expected.begin(), expected.begin() + static_cast<ptrdiff_t>(shift),
                    expected.end());
        return CountWrong(block_, Block(), element_, expected);
      }
      case CollectiveKind::kAllToAll: {
        int64_t wrong = 0;
        if (c_.uneven) {
          size_t at = 0;
          for (int from = 0; from < n_; ++from) {
            wrong += CountWrong(output_ + at * element_, receive_counts_[from], element_,
                                ExchangedBlock(from, client_.rank()));
            at += receive_counts_[from];
          }
          return wrong;
        }
        for (int from = 0; from < n_; ++from) {
          wrong += CountWrong(whole_ + from * Block() * element_, Block(), element_,
                              ExchangedBlock(from, client_.rank()));
        }
        return wrong;
      }
      case CollectiveKind::kBarrier: break;
    }
    return static_cast<int64_t>(count_);
  }

 private:
  size_t Block() const { return count_ / static_cast<size_t>(n_); }

  // The block rank `from` sends rank `to` of an all-to-all: the inputs of a rank from + 2 x to,
  // from the block's first element. One pattern across the whole buffer, as an all-reduce's,
  // would not do: in place, with blocks of 3 mod 5 elements, an exchange leaves the values
  // no exchange leaves. Here a block that did not arrive (to's own block `from`, rank
  // to + 2 x from's inputs) differs from the expected one at any length wherever from - to
  // is not a multiple of 5, the inputs' period in the rank.
  std::vector<std::byte> ExchangedBlock(int from, int to) const {
    return Pattern(c_.dtype, ReduceOp::kSum, n_, from + 2 * to);
  }

  Client& client_;
  const Config& c_;
  std::byte* whole_;
  std::byte* block_;
  std::byte* output_;
  size_t count_;
  std::vector<uint64_t> send_counts_, receive_counts_;  // alltoallv's
  int n_;
  size_t element_;
};

absl::StatusOr<Row> MeasureSize(Client& client, const Config& c, SizedCollective collective,
                                size_t bytes) {
  const std::string name = absl::StrCat("bench/", NameOf(c), "/", bytes);
  const auto [iters, warmups] =
      bench::IterationsFor(static_cast<int64_t>(bytes), c.iters, c.warmup_iters);
  collective.FillInput();
  for (int64_t i = 0; i < warmups; ++i) {
    if (absl::Status s = collective.Run(name); !s.ok()) return s;
  }
  if (absl::Status s = client.Barrier(name + "/start"); !s.ok()) return s;
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < iters; ++i) {
    if (absl::Status s = collective.Run(name); !s.ok()) return s;
  }
  const double mine = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(iters);
  absl::StatusOr<double> slowest = AcrossRanks(client, name + "/time", mine, ReduceOp::kMax);
  if (!slowest.ok()) return slowest.status();

  int64_t wrong = 0;
  if (c.check) {
    collective.FillInput();
    if (absl::Status s = collective.Run(name + "/check"); !s.ok()) return s;
    wrong = collective.CountWrongResult();
  }
  absl::StatusOr<int64_t> total = AcrossRanks(client, name + "/wrong", wrong, ReduceOp::kSum);
  if (!total.ok()) return total.status();
  return Row{*slowest, *total, warmups + iters + (c.check ? 1 : 0)};
}

int Run() {
  absl::StatusOr<Config> config = ReadFlags();
  if (!config.ok() || absl::GetFlag(FLAGS_worker).empty()) {
    std::fprintf(stderr, "ringsync-bench: %s\n",
                 config.ok() ? "--worker is required" : std::string(config.status().message()).c_str());
    return 2;
  }
  const Config& c = *config;
  ClientOptions options;
  options.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  options.client_name = absl::StrCat("ringsync-bench pid ", ::getpid());
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.stage_in_registered_memory = absl::GetFlag(FLAGS_stage_in_registered_memory);
  options.call_channel_spin = absl::GetFlag(FLAGS_call_channel_spin);
  if (c.shared_memory_threshold.has_value()) {
    options.shared_memory_threshold_bytes = static_cast<size_t>(*c.shared_memory_threshold);
  }
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(absl::GetFlag(FLAGS_worker), options);
  if (!connected.ok()) {
    std::fprintf(stderr, "ringsync-bench: %s\n", connected.status().ToString().c_str());
    return 1;
  }
  Client& client = **connected;
  const int n = client.world_size();
  const bool print = client.rank() == 0;
  const size_t element = DTypeSize(c.dtype);
  // One buffer of the largest size, uint64_t-aligned for every dtype; twice that for an
  // uneven all-to-all, whose output follows its input (registered: side by side, as the
  // SDK runs them with no copy).
  const size_t buffer_bytes = (static_cast<size_t>(c.max_bytes) + 8) * (c.uneven ? 2 : 1);
  std::vector<uint64_t> storage;
  RegisteredBuffer registered;
  std::byte* buffer = nullptr;
  if (absl::GetFlag(FLAGS_registered)) {
    absl::StatusOr<RegisteredBuffer> allocated = client.AllocateBytes(buffer_bytes);
    if (!allocated.ok()) {
      std::fprintf(stderr, "ringsync-bench: --registered: %s\n", allocated.status().ToString().c_str());
      return 1;
    }
    registered = *std::move(allocated);
    buffer = static_cast<std::byte*>(registered.data());  // page-aligned
  } else {
    storage.resize(buffer_bytes / 8 + 1);
    buffer = reinterpret_cast<std::byte*>(storage.data());
  }
  // An all-gather's input, a reduce-scatter's result: a rank's block of the largest size.
  // (An all-to-all's blocks stay in the one buffer: it runs in place.)
  const CollectiveKindTraits traits = TraitsOf(c.collective);
  const bool blocks = traits.gathers || traits.scatters;
  std::vector<uint64_t> block_storage;
  if (blocks) block_storage.resize((static_cast<size_t>(c.max_bytes) / n + 7) / 8 + 1);
  std::byte* block = reinterpret_cast<std::byte*>(block_storage.data());

  const bench::BusFactor bus = bench::BusFactorOf(NameOf(c), n);
  const double bus_factor = bus.value;
  if (print) {
    std::printf("# ringsync-bench %s: nranks %d, rank 0 worker %s, build %s\n",
                NameOf(c).c_str(), n,
                absl::GetFlag(FLAGS_worker).c_str(), RINGSYNC_BENCH_BUILD);
    std::printf("# minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %lld iters: %lld "
                "(at most %lld MiB per batch) validation: %d\n",
                (long long)c.min_bytes, (long long)c.max_bytes, (long long)c.step_factor,
                (long long)c.warmup_iters, (long long)c.iters, (long long)(bench::kBytesPerBatch >> 20),
                c.check ? 1 : 0);
    std::printf("# time = max over ranks of (batch wall time / iters); algbw = size / time; "
                "busbw = algbw * %s = algbw * %.3f\n#\n", bus.formula, bus_factor);
    bench::PrintColumnHeads();
  }
  // The SDK sets up its staging arena at its first small plain-span call (a registration
  // of 16 MiB, some milliseconds of CPU per rank). Made here, before any size is timed:
  // otherwise the first size's "/time" reduction makes it on the ranks that finished
  // first while the slowest still runs its last timed collective, and the first row of a
  // registered sweep, or of one that starts at 1 MiB, read up to 4x slow.
  if (absl::StatusOr<int64_t> ready = AcrossRanks<int64_t>(client, "bench/ready", 0, ReduceOp::kSum);
      !ready.ok()) {
    std::fprintf(stderr, "ringsync-bench rank %d: %s\n", client.rank(), ready.status().ToString().c_str());
    return 1;
  }
  int64_t total_wrong = 0, last_count = -1, largest = 0, collectives = 0;
  double busbw_sum = 0;
  int rows = 0;
  for (int64_t bytes = c.min_bytes; bytes <= c.max_bytes; bytes *= c.step_factor) {
    // An all-gather's result, a reduce-scatter's input and an all-to-all's data are N
    // whole blocks.
    const int64_t multiple = c.uneven                       ? bench::AllToAllVShares(n)
                             : blocks || traits.exchanges ? n
                                                          : 1;
    const int64_t count =
        std::max<int64_t>(multiple, bytes / static_cast<int64_t>(element) / multiple * multiple);
    if (count == last_count || count * static_cast<int64_t>(element) > c.max_bytes) {
      continue;  // sizes below one element (block) repeat
    }
    last_count = count;
    const int64_t size = count * static_cast<int64_t>(element);
    // In place in a registered buffer: the rank's own block of the all-gather's result or
    // the reduce-scatter's input (the other blocks of a reduce-scatter's end with partial
    // sums).
    std::byte* rank_block = block;
    if (registered.data() != nullptr && (c.collective == CollectiveKind::kAllGather ||
                                         c.collective == CollectiveKind::kReduceScatter)) {
      rank_block = buffer + static_cast<size_t>(client.rank()) * static_cast<size_t>(count / n) * element;
    }
    std::byte* output = c.uneven ? buffer + static_cast<size_t>(size) : nullptr;
    absl::StatusOr<Row> row = MeasureSize(
        client, c,
        SizedCollective(client, c, buffer, rank_block, static_cast<size_t>(count), output),
        static_cast<size_t>(size));
    if (!row.ok()) {
      std::fprintf(stderr, "ringsync-bench rank %d: %s\n", client.rank(), row.status().ToString().c_str());
      return 1;
    }
    const double algbw = static_cast<double>(size) / row->seconds / 1e9;
    total_wrong += row->wrong;
    collectives += row->collectives;
    busbw_sum += algbw * bus_factor;
    ++rows;
    largest = size;
    if (print) {
      bench::PrintRow(size, count, DTypeName(c.dtype), traits.reduces ? ReduceOpName(c.op) : "none",
                      row->seconds, bus_factor,
                      row->wrong);
    }
  }
  // Each rank's peak RSS, gathered so rank 0 can print them all.
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  const int64_t my_rss_kib = usage.ru_maxrss;
  std::vector<int64_t> rss(n);
  if (absl::Status s = client.AllGather<int64_t>("bench/rss", absl::MakeConstSpan(&my_rss_kib, 1),
                                                 absl::MakeSpan(rss));
      !s.ok()) {
    std::fprintf(stderr, "ringsync-bench rank %d: %s\n", client.rank(), s.ToString().c_str());
    return 1;
  }
  if (print) {
    std::printf("# Out of bounds values : %lld %s\n", (long long)total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? busbw_sum / rows : 0.0);
    std::printf("# Ring bytes sent per rank at %lld B: %.0f (busbw's factor * size, from the schedule; "
                "the SDK does not report the worker's count)\n",
                (long long)largest, bus_factor * static_cast<double>(largest));
    // What ran, for whoever divides a measure of the whole run (bench/worker_cpu.sh):
    // the sizes' iterations are capped per batch (IterationsFor).
    std::printf("# Collectives per rank: %lld of the swept sizes (warm-ups, timed%s), %d small "
                "(per size a start barrier, the time and #wrong reductions; the first reduction "
                "and the RSS gather)\n",
                (long long)collectives, c.check ? ", checks" : "", 3 * rows + 2);
    std::printf("# Client (bench process) peak RSS per rank, MiB:");
    for (int64_t kib : rss) std::printf(" %.1f", static_cast<double>(kib) / 1024);
    std::printf("\n");
  }
  std::fflush(stdout);
  absl::SleepFor(absl::GetFlag(FLAGS_linger));
  return total_wrong > 0 ? 1 : 0;
}

}  // namespace
}  // namespace ringsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "collective latency and bandwidth through ringsync, nccl-tests style; one process per "
      "rank:\n  ringsync-bench --worker=unix:/path/w0.sock [--collective=allreduce|broadcast|"
      "allgather|reducescatter|scatter|gather|alltoall|alltoallv --min_bytes=4 "
      "--max_bytes=256M --dtype=float32 --op=sum]\nLarge sizes run fewer iterations: iters = max(2, min(--iters, "
      "1 GiB / size)); warm-ups min(--warmup_iters, max(1, 1 GiB / size)).");
  absl::SetFlagsUsageConfig(ringsync::HelpListingFlagsFrom("bench/ringsync_bench.cc"));
  absl::ParseCommandLine(argc, argv);
  return ringsync::Run();
}
