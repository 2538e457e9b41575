// gloo-peer-bench: the Gloo C++ library's own all-reduce (gloo::allreduce over its TCP
// transport), or with --collective its gloo::broadcast, gloo::allgather, gloo::scatter,
// gloo::gather, gloo::alltoall, gloo::alltoallv or gloo::ReduceScatterHalvingDoubling, the
// peer ringsync-bench is compared with. Same sizes,
// inputs, iteration policy and columns as bench/ringsync_bench.cc, so
// bench/compare_with_gloo.sh joins the tables row by row.
//
//   gloo-peer-bench --nranks=4 --min_bytes=1M --max_bytes=256M
//   gloo-peer-bench --nranks=4 --rank=R --hostname=H --store_dir=DIR ...   # one per host
//
// The N ranks are processes forked by this one before any of them touches Gloo; they meet
// through a FileStore in a fresh temporary directory (removed at the end) and connect a
// full mesh of TCP pairs on 127.0.0.1. With --rank this process is that one rank only,
// on address --hostname, meeting the others through --store_dir (a directory every rank
// sees, empty at the start; the caller removes it): how bench/netns_link_bench.py runs
// Gloo across its namespace hosts. Rank 0 prints the table; the exit status is non-zero
// if a rank failed or a result was wrong.
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
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "bench/peer_sweep.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/reduce_scatter.h"
#include "gloo/scatter.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

ABSL_FLAG(int, nranks, 4, "ranks (processes) on 127.0.0.1, or in all with --rank");
ABSL_FLAG(int, rank, -1, "run this rank only (0..nranks-1), with --store_dir; -1: fork every rank");
ABSL_FLAG(std::string, hostname, "127.0.0.1", "the address this rank's TCP pairs bind to");
ABSL_FLAG(std::string, store_dir, "", "with --rank: the directory the ranks meet in");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Gloo's timeout for rendezvous and each collective");

namespace {

namespace bench = ringsync::bench;

struct Config {
  int nranks;
  bench::PeerSweep sweep;
  std::chrono::milliseconds timeout;
  std::string hostname;
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
    if (context_->rank == 0) {
      std::printf("# gloo-peer-bench %s: nranks %d, gloo::%s, TCP, rank 0 on %s\n",
                  c_.sweep.collective.c_str(), n,
                  c_.sweep.collective == "allreduce"       ? "allreduce (ring)"
                  : c_.sweep.collective == "reducescatter" ? "ReduceScatterHalvingDoubling"
                                                           : c_.sweep.collective.c_str(),
                  c_.hostname.c_str());
    }
    bench::PeerCollectives<T> peer;
    peer.all_reduce = [this](T* data, size_t count) { AllReduce(data, count, Reduction()); };
    peer.broadcast = [this](T* data, size_t count) {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data, count);
      opts.setRoot(0);
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::broadcast(opts);
    };
    peer.all_gather = [this](const T* input, size_t count, T* output) {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(const_cast<T*>(input), count);
      opts.setOutput(output, count * static_cast<size_t>(context_->size));
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::allgather(opts);
    };
    peer.scatter = [this](const T* input, size_t count, T* output) {
      std::vector<T*> blocks;  // the root's input, block by block (read at the root only)
      for (int r = 0; r < context_->size; ++r) {
        blocks.push_back(const_cast<T*>(input) + static_cast<size_t>(r) * count);
      }
      gloo::ScatterOptions opts(context_);
      opts.setInputs(blocks, count);
      opts.setOutput(output, count);
      opts.setRoot(0);
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::scatter(opts);
    };
    peer.gather = [this](const T* input, size_t count, T* output) {
      gloo::GatherOptions opts(context_);
      opts.setInput(const_cast<T*>(input), count);
      if (context_->rank == 0) opts.setOutput(output, count * static_cast<size_t>(context_->size));
      opts.setRoot(0);
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::gather(opts);
    };
    peer.all_to_all = [this](const T* input, size_t count, T* output) {
      // Not in place: gloo::alltoall sends from its input while it receives into its output.
      const size_t all = count * static_cast<size_t>(context_->size);
      gloo::AlltoallOptions opts(context_);
      opts.setInput(const_cast<T*>(input), all);
      opts.setOutput(output, all);
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::alltoall(opts);
    };
    peer.all_to_all_v = [this](const T* input, const std::vector<uint64_t>& send_counts,
                               T* output, const std::vector<uint64_t>& receive_counts) {
      gloo::AlltoallvOptions opts(context_);
      opts.setInput(const_cast<T*>(input), std::vector<int64_t>(send_counts.begin(), send_counts.end()));
      opts.setOutput(output, std::vector<int64_t>(receive_counts.begin(), receive_counts.end()));
      opts.setTag(next_tag_++);
      opts.setTimeout(c_.timeout);
      gloo::alltoallv(opts);
    };
    // Gloo's reduce-scatter is an algorithm object over fixed buffers (no functional
    // form): made once per size, as Gloo's own benchmark does, and run in place.
    peer.reduce_scatter = [this](T* data, size_t count) {
      const int n = context_->size;
      if (reduce_scatter_ == nullptr || reduce_scatter_data_ != data ||
          reduce_scatter_count_ != count) {
        reduce_scatter_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
            context_, std::vector<T*>{data}, static_cast<int>(count) * n,
            std::vector<int>(static_cast<size_t>(n), static_cast<int>(count)), ReductionFunction());
        reduce_scatter_data_ = data;
        reduce_scatter_count_ = count;
      }
      reduce_scatter_->run();
      return data;  // this rank's block, moved to the buffer's start
    };
    peer.barrier = [this] { Barrier(); };
    peer.max_over_ranks = [this](double v) {
      AllReduce(&v, 1, static_cast<RawFunc>(&gloo::max<double>));
      return v;
    };
    peer.sum_over_ranks = [this](int64_t v) {
      AllReduce(&v, 1, static_cast<RawFunc>(&gloo::sum<int64_t>));
      return v;
    };
    return bench::RunSweep(c_.sweep, context_->rank, n, peer, "Gloo");
  }

 private:
  using Func = gloo::AllreduceOptions::Func;

  // gloo/math.h's element-wise functions, the (void*, const void*, const void*, size_t)
  // overloads Gloo's own collectives use.
  using RawFunc = void (*)(void*, const void*, const void*, size_t);
  Func Reduction() const {
    if (c_.sweep.op == "min") return static_cast<RawFunc>(&gloo::min<T>);
    if (c_.sweep.op == "max") return static_cast<RawFunc>(&gloo::max<T>);
    return static_cast<RawFunc>(&gloo::sum<T>);
  }

  const gloo::ReductionFunction<T>* ReductionFunction() const {
    if (c_.sweep.op == "min") return gloo::ReductionFunction<T>::min;
    if (c_.sweep.op == "max") return gloo::ReductionFunction<T>::max;
    return gloo::ReductionFunction<T>::sum;
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

  const Config& c_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t next_tag_ = 0;
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<T>> reduce_scatter_;
  T* reduce_scatter_data_ = nullptr;
  size_t reduce_scatter_count_ = 0;
};

// One rank: rendezvous, then the sweep. Returns the process exit status.
int RankMain(const Config& c, int rank, const std::string& store_dir) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = c.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, c.nranks);
    context->setTimeout(c.timeout);
    context->connectFullMesh(store, device);
    int64_t wrong = 0;
    const std::string& dtype = c.sweep.dtype;
    if (dtype == "float64") wrong = RankBench<double>(c, context).Run();
    else if (dtype == "int32") wrong = RankBench<int32_t>(c, context).Run();
    else if (dtype == "int64") wrong = RankBench<int64_t>(c, context).Run();
    else wrong = RankBench<float>(c, context).Run();
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-peer-bench rank %d: %s\n", rank, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::optional<bench::PeerSweep> sweep = bench::ReadPeerSweep("gloo-peer-bench");
  const int nranks = absl::GetFlag(FLAGS_nranks);
  if (!sweep || nranks < 2 || nranks > 64) {
    if (sweep) std::fprintf(stderr, "gloo-peer-bench: --nranks must be 2..64\n");
    return 2;
  }
  const Config c{nranks, *sweep,
                 std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_timeout))),
                 absl::GetFlag(FLAGS_hostname)};
  if (const int rank = absl::GetFlag(FLAGS_rank); rank != -1) {
    const std::string store_dir = absl::GetFlag(FLAGS_store_dir);
    if (rank < 0 || rank >= nranks || store_dir.empty()) {
      std::fprintf(stderr, "gloo-peer-bench: --rank must be 0..nranks-1, with --store_dir\n");
      return 2;
    }
    return RankMain(c, rank, store_dir);
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
