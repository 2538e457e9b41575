// gloo-peer-bench: the Gloo C++ library's own all-reduce (gloo::allreduce over its TCP
// transport), the peer ringsync-bench is compared with. Same sizes, inputs, iteration
// policy and columns as bench/ringsync_bench.cc, so bench/compare_with_gloo.sh joins the
// tables row by row.
//
//   gloo-peer-bench --nranks=4 --min_bytes=1M --max_bytes=256M
//
// The N ranks are processes forked by this one before any of them touches Gloo; they meet
// through a FileStore in a fresh temporary directory (removed at the end) and connect a
// full mesh of TCP pairs on 127.0.0.1. Rank 0 prints the table; the exit status is
// non-zero if a rank failed or a result was wrong.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_table.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

ABSL_FLAG(int, nranks, 4, "ranks (processes) on 127.0.0.1");
ABSL_FLAG(std::string, min_bytes, "1M", "smallest all-reduce, e.g. 4, 64K, 1M");
ABSL_FLAG(std::string, max_bytes, "256M", "largest all-reduce");
ABSL_FLAG(int64_t, step_factor, 2, "size multiplier between rows");
ABSL_FLAG(int64_t, iters, 20, "timed all-reduces per size (fewer for large sizes, as ringsync-bench)");
ABSL_FLAG(int64_t, warmup_iters, 5, "untimed all-reduces per size first");
ABSL_FLAG(std::string, dtype, "float32", "float32, float64, int32 or int64");
ABSL_FLAG(std::string, op, "sum", "sum, min or max");
ABSL_FLAG(int, check, 1, "1: check one all-reduce of known inputs per size");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Gloo's timeout for rendezvous and each collective");

namespace {

constexpr size_t kPeriod = 15;  // inputs repeat with this period in the element index

// Rank r's element i: ringsync-bench's inputs for sum, min and max.
int64_t InputValue(int rank, size_t i) {
  return static_cast<int64_t>((i + 3 * static_cast<size_t>(rank)) % 5) - 2;
}

struct Config {
  int nranks;
  int64_t min_bytes, max_bytes, step_factor, iters, warmup_iters;
  std::string dtype, op;
  bool check;
  std::chrono::milliseconds timeout;
};

// One rank's sweep over the sizes, for element type T.
template <typename T>
class RankBench {
 public:
  RankBench(const Config& c, std::shared_ptr<gloo::Context> context)
      : c_(c), context_(std::move(context)) {}

  // Returns the number of wrong elements over all ranks and sizes.
  int64_t Run() {
    const int n = context_->size;
    const bool print = context_->rank == 0;
    std::vector<T> buffer(static_cast<size_t>(c_.max_bytes) / sizeof(T) + 1);
    const double bus = 2.0 * (n - 1) / n;
    if (print) PrintHeader(n, bus);
    int64_t total_wrong = 0;
    size_t last = 0;
    for (int64_t size = c_.min_bytes; size <= c_.max_bytes; size *= c_.step_factor) {
      const size_t count = std::max<size_t>(1, static_cast<size_t>(size) / sizeof(T));
      if (count == last) continue;
      last = count;
      const int64_t bytes = static_cast<int64_t>(count * sizeof(T));
      const auto [iters, warmups] = ringsync::bench::IterationsFor(bytes, c_.iters, c_.warmup_iters);
      Fill(buffer.data(), count);
      for (int64_t i = 0; i < warmups; ++i) AllReduce(buffer.data(), count, Reduction());
      Barrier();
      const absl::Time start = absl::Now();
      for (int64_t i = 0; i < iters; ++i) AllReduce(buffer.data(), count, Reduction());
      double seconds = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(iters);
      AllReduce(&seconds, 1, static_cast<RawFunc>(&gloo::max<double>));
      int64_t wrong = 0;
      if (c_.check) {
        Fill(buffer.data(), count);
        AllReduce(buffer.data(), count, Reduction());
        wrong = CountWrong(buffer.data(), count, n);
      }
      AllReduce(&wrong, 1, static_cast<RawFunc>(&gloo::sum<int64_t>));
      total_wrong += wrong;
      if (print) ringsync::bench::PrintRow(bytes, count, c_.dtype, c_.op, seconds, bus, wrong);
    }
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    double peak_mib = static_cast<double>(usage.ru_maxrss) / 1024;
    AllReduce(&peak_mib, 1, static_cast<RawFunc>(&gloo::max<double>));
    if (print) {
      std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong),
                  total_wrong ? "FAILED" : "OK");
      std::printf("# Gloo rank peak RSS (max over ranks), MiB: %.1f\n", peak_mib);
    }
    return total_wrong;
  }

 private:
  using Func = gloo::AllreduceOptions::Func;

  // gloo/math.h's element-wise functions, the (void*, const void*, const void*, size_t)
  // overloads Gloo's own collectives use.
  using RawFunc = void (*)(void*, const void*, const void*, size_t);
  Func Reduction() const {
    if (c_.op == "min") return static_cast<RawFunc>(&gloo::min<T>);
    if (c_.op == "max") return static_cast<RawFunc>(&gloo::max<T>);
    return static_cast<RawFunc>(&gloo::sum<T>);
  }

  template <typename U>
  void AllReduce(U* data, size_t count, Func reduce) {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(std::move(reduce));
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(next_tag_++);
    opts.setTimeout(c_.timeout);
    gloo::allreduce(opts);
  }

  void Barrier() {
    gloo::BarrierOptions opts(context_);
    opts.setTag(next_tag_++);
    opts.setTimeout(c_.timeout);
    gloo::barrier(opts);
  }

  void Fill(T* data, size_t count) const {
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(InputValue(context_->rank, i));
  }

  T Expected(int n, size_t i) const {
    T sum = 0, min = static_cast<T>(InputValue(0, i)), max = min;
    for (int r = 0; r < n; ++r) {
      const T v = static_cast<T>(InputValue(r, i));
      sum += v;
      min = std::min(min, v);
      max = std::max(max, v);
    }
    return c_.op == "min" ? min : c_.op == "max" ? max : sum;
  }

  int64_t CountWrong(const T* data, size_t count, int n) const {
    T expected[kPeriod];
    for (size_t i = 0; i < kPeriod; ++i) expected[i] = Expected(n, i);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += data[i] != expected[i % kPeriod];
    return wrong;
  }

  void PrintHeader(int n, double bus) const {
    std::printf("# gloo-peer-bench all-reduce: nranks %d, gloo::allreduce (ring), TCP on 127.0.0.1\n", n);
    std::printf("# time = max over ranks of (batch wall time / iters); algbw = size / time; "
                "busbw = algbw * 2(N-1)/N = algbw * %.3f\n#\n", bus);
    ringsync::bench::PrintColumnHeads();
  }

  const Config& c_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t next_tag_ = 0;
};

// One rank: rendezvous, then the sweep. Returns the process exit status.
int RankMain(const Config& c, int rank, const std::string& store_dir) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, c.nranks);
    context->setTimeout(c.timeout);
    context->connectFullMesh(store, device);
    int64_t wrong = 0;
    if (c.dtype == "float64") wrong = RankBench<double>(c, context).Run();
    else if (c.dtype == "int32") wrong = RankBench<int32_t>(c, context).Run();
    else if (c.dtype == "int64") wrong = RankBench<int64_t>(c, context).Run();
    else wrong = RankBench<float>(c, context).Run();
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-peer-bench rank %d: %s\n", rank, e.what());
    return 1;
  }
}

bool ReadConfig(Config& c) {
  c.nranks = absl::GetFlag(FLAGS_nranks);
  c.min_bytes = ringsync::bench::ParseSize(absl::GetFlag(FLAGS_min_bytes));
  c.max_bytes = ringsync::bench::ParseSize(absl::GetFlag(FLAGS_max_bytes));
  c.step_factor = absl::GetFlag(FLAGS_step_factor);
  c.iters = absl::GetFlag(FLAGS_iters);
  c.warmup_iters = absl::GetFlag(FLAGS_warmup_iters);
  c.dtype = absl::GetFlag(FLAGS_dtype);
  c.op = absl::GetFlag(FLAGS_op);
  c.check = absl::GetFlag(FLAGS_check) != 0;
  c.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_timeout)));
  const bool dtype_ok = c.dtype == "float32" || c.dtype == "float64" || c.dtype == "int32" ||
                        c.dtype == "int64";
  const bool op_ok = c.op == "sum" || c.op == "min" || c.op == "max";
  return c.nranks >= 2 && c.nranks <= 64 && c.min_bytes > 0 && c.max_bytes >= c.min_bytes &&
         c.step_factor >= 2 && c.iters >= 1 && c.warmup_iters >= 0 && dtype_ok && op_ok;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Config c;
  if (!ReadConfig(c)) {
    std::fprintf(stderr, "gloo-peer-bench: bad flags (nranks 2..64, sizes like 1M with min <= max, "
                         "step_factor >= 2, dtype float32|float64|int32|int64, op sum|min|max)\n");
    return 2;
  }
  char pattern[] = "/tmp/gloo-peer-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    std::perror("gloo-peer-bench: mkdtemp");
    return 1;
  }
  const std::string store_dir = pattern;
  std::fflush(stdout);
  std::vector<pid_t> ranks;
  for (int r = 0; r < c.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(RankMain(c, r, store_dir));
    if (pid < 0) {
      std::perror("gloo-peer-bench: fork");
      break;
    }
    ranks.push_back(pid);
  }
  int status = ranks.size() == static_cast<size_t>(c.nranks) ? 0 : 1;
  for (pid_t pid : ranks) {
    int rank_status = 0;
    if (waitpid(pid, &rank_status, 0) != pid || !WIFEXITED(rank_status) ||
        WEXITSTATUS(rank_status) != 0) {
      status = 1;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
  return status;
}
