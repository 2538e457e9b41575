// mpi-peer-bench: OpenMPI's own all-reduce (MPI_Allreduce in place), or with --collective
// its MPI_Bcast, MPI_Allgather, MPI_Scatter, MPI_Gather, MPI_Alltoall, MPI_Alltoallv or
// MPI_Reduce_scatter_block (in place), the MPI peer ringsync-bench is compared with. Same
// sizes, inputs, iteration policy and columns as bench/ringsync_bench.cc and
// bench/gloo_peer_bench.cc (bench/peer_sweep.h), so bench/compare_with_gloo.sh joins the
// tables row by row.
//
//   mpirun -np 4 --mca btl tcp,self --mca btl_tcp_if_include lo mpi-peer-bench --min_bytes=1M
//   mpirun -np 4 --mca btl vader,self mpi-peer-bench --min_bytes=1M     # shared memory
//
// The ranks are the processes mpirun starts; which transport (BTL) carries the bytes is
// mpirun's choice (--mca btl), named in the header. Rank 0 prints the table; the exit
// status is non-zero on every rank if a result was wrong.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/flags/parse.h"
#include "bench/peer_sweep.h"

namespace {

namespace bench = ringsync::bench;

template <typename T>
MPI_Datatype TypeOf();
template <> MPI_Datatype TypeOf<float>() { return MPI_FLOAT; }
template <> MPI_Datatype TypeOf<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype TypeOf<int32_t>() { return MPI_INT32_T; }
template <> MPI_Datatype TypeOf<int64_t>() { return MPI_INT64_T; }

MPI_Op OpOf(const std::string& op) {
  if (op == "min") return MPI_MIN;
  if (op == "max") return MPI_MAX;
  return MPI_SUM;
}

template <typename T>
void AllReduce(T* data, size_t count, MPI_Op op) {
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), TypeOf<T>(), op, MPI_COMM_WORLD);
}

// What carries the bytes: mpirun passes --mca btl to the ranks as OMPI_MCA_btl.
std::string Transport() {
  const char* btl = std::getenv("OMPI_MCA_btl");
  return btl != nullptr ? std::string("btl ") + btl : "mpirun's default transports";
}

// One rank's sweep for element type T. Returns the wrong elements over all ranks and sizes.
template <typename T>
int64_t Sweep(const bench::PeerSweep& sweep, int rank, int n) {
  if (bench::SweepCounts(sweep, sizeof(T)).back() > static_cast<size_t>(INT32_MAX)) {
    if (rank == 0) std::fprintf(stderr, "mpi-peer-bench: over 2^31-1 elements per all-reduce\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, static_cast<size_t>(length));
    if (const size_t comma = library.find(','); comma != std::string::npos) library.resize(comma);
    const char* call = sweep.collective == "broadcast"   ? "MPI_Bcast"
                       : sweep.collective == "allgather" ? "MPI_Allgather"
                       : sweep.collective == "scatter"   ? "MPI_Scatter"
                       : sweep.collective == "gather"    ? "MPI_Gather"
                       : sweep.collective == "alltoall"  ? "MPI_Alltoall"
                       : sweep.collective == "alltoallv" ? "MPI_Alltoallv"
                       : sweep.collective == "reducescatter" ? "MPI_Reduce_scatter_block in place"
                                                         : "MPI_Allreduce in place";
    std::printf("# mpi-peer-bench %s: nranks %d, %s, %s (%s)\n", sweep.collective.c_str(), n,
                call, Transport().c_str(), library.c_str());
  }
  const MPI_Op op = OpOf(sweep.op);
  bench::PeerCollectives<T> peer;
  peer.all_reduce = [op](T* data, size_t count) { AllReduce(data, count, op); };
  peer.broadcast = [](T* data, size_t count) {
    MPI_Bcast(data, static_cast<int>(count), TypeOf<T>(), 0, MPI_COMM_WORLD);
  };
  peer.all_gather = [](const T* input, size_t count, T* output) {
    MPI_Allgather(input, static_cast<int>(count), TypeOf<T>(), output, static_cast<int>(count),
                  TypeOf<T>(), MPI_COMM_WORLD);
  };
  peer.scatter = [](const T* input, size_t count, T* output) {
    MPI_Scatter(input, static_cast<int>(count), TypeOf<T>(), output, static_cast<int>(count),
                TypeOf<T>(), 0, MPI_COMM_WORLD);
  };
  peer.gather = [](const T* input, size_t count, T* output) {
    MPI_Gather(input, static_cast<int>(count), TypeOf<T>(), output, static_cast<int>(count),
               TypeOf<T>(), 0, MPI_COMM_WORLD);
  };
  // From an input into an output, MPI_Alltoall's usual form: OpenMPI runs an MPI_IN_PLACE
  // one through a basic algorithm of its own (pairs of ranks swap blocks through a
  // temporary buffer), not the tuned ones.
  peer.all_to_all = [](const T* input, size_t count, T* output) {
    MPI_Alltoall(input, static_cast<int>(count), TypeOf<T>(), output, static_cast<int>(count),
                 TypeOf<T>(), MPI_COMM_WORLD);
  };
  peer.all_to_all_v = [](const T* input, const std::vector<uint64_t>& send_counts, T* output,
                         const std::vector<uint64_t>& receive_counts) {
    const auto ints = [](const std::vector<uint64_t>& counts, std::vector<int>& displacements) {
      std::vector<int> out;
      int at = 0;
      for (uint64_t count : counts) {
        out.push_back(static_cast<int>(count));
        displacements.push_back(at);
        at += static_cast<int>(count);
      }
      return out;
    };
    std::vector<int> send_at, receive_at;
    const std::vector<int> sends = ints(send_counts, send_at);
    const std::vector<int> receives = ints(receive_counts, receive_at);
    MPI_Alltoallv(input, sends.data(), send_at.data(), TypeOf<T>(), output, receives.data(),
                  receive_at.data(), TypeOf<T>(), MPI_COMM_WORLD);
  };
  // In place, as Gloo's: the input is the whole buffer, the block lands at its start.
  peer.reduce_scatter = [op](T* data, size_t count) {
    MPI_Reduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(count), TypeOf<T>(), op,
                             MPI_COMM_WORLD);
    return data;
  };
  peer.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  peer.max_over_ranks = [](double v) {
    AllReduce(&v, 1, MPI_MAX);
    return v;
  };
  peer.sum_over_ranks = [](int64_t v) {
    AllReduce(&v, 1, MPI_SUM);
    return v;
  };
  return bench::RunSweep(sweep, rank, n, peer, "MPI");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  absl::ParseCommandLine(argc, argv);
  const std::optional<bench::PeerSweep> sweep = bench::ReadPeerSweep("mpi-peer-bench");
  if (!sweep || n < 2) {
    if (sweep && rank == 0) std::fprintf(stderr, "mpi-peer-bench: needs 2 or more ranks (mpirun -np N)\n");
    MPI_Finalize();
    return 2;
  }
  int64_t wrong = 0;
  if (sweep->dtype == "float64") wrong = Sweep<double>(*sweep, rank, n);
  else if (sweep->dtype == "int32") wrong = Sweep<int32_t>(*sweep, rank, n);
  else if (sweep->dtype == "int64") wrong = Sweep<int64_t>(*sweep, rank, n);
  else wrong = Sweep<float>(*sweep, rank, n);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
