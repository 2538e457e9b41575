// grpc-ring-bench: the ceiling of the transport the ring runs on. N processes on
// 127.0.0.1 form a ring of gRPC bidi streams with the same channel arguments as the
// workers' peer streams; for an "all-reduce" of S bytes each rank streams what a ring
// all-reduce moves per rank, 2(N-1)/N * S bytes, to its right neighbour in zero-copy
// segments (a slice pointing at static memory, no encoding) while receiving as much from
// its left one (counted, never touched). No schedule, no reduction, no waiting for the
// previous step: busbw here is what the ring could reach if its own work cost nothing.
// With --schedule=ring the same bytes keep a ring all-reduce's data dependency: the
// round is 2(N-1) steps of S/N bytes in segments, and segment j of step s leaves only
// once segment j of step s-1 has arrived from the left (started from that read's
// completion when the stream had run dry), still without touching the bytes — what the
// ring could reach with a schedule but no reduction, copies or threads of its own.
// The ranks use gRPC's callback API, as the workers do; with --api=cq one thread per rank
// drives both of its streams through a completion queue instead (the thread waiting for
// completions polls the sockets itself, so no completion is handed to a callback thread):
// what the same bytes cost under the other API gRPC offers.
// Same columns as ringsync-bench (type "bytes", redop "none", #wrong always 0), so
// bench/compare_with_gloo.sh can show it as a column (PEERS="ringsync grpc-ring").
//
//   grpc-ring-bench --nranks=4 --min_bytes=16M --max_bytes=256M --segment_bytes=1M
//
// The ranks are forked before any gRPC state exists; the parent only relays the ports
// and start signals over pipes and prints the rows.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "bench/bench_table.h"
#include "bench/grpc_ring_rank.h"
#include "bench/peer_sweep.h"
#include "daemon/process/heap_retention.h"

ABSL_FLAG(int, nranks, 4, "ranks (processes) on 127.0.0.1");
ABSL_FLAG(std::string, segment_bytes, "1M", "bytes per gRPC message (the workers' --segment_bytes)");
ABSL_FLAG(std::string, api, "callback",
          "callback: gRPC's callback reactors (as the workers); cq: one thread per rank drives "
          "both streams through a completion queue");
ABSL_FLAG(std::string, schedule, "free",
          "free: stream each round's bytes back to back; ring: a segment leaves only once the "
          "segment it forwards arrived (a ring all-reduce's dependency, see above)");
// The sweep flags are bench/peer_sweep.h's (--min_bytes is the all-reduce size S);
// --dtype, --op and --check are accepted and ignored: bytes are not reduced.

namespace bench = ringsync::bench;
using bench::ReadLine;
using bench::WriteLine;

int main(int argc, char** argv) {
  // As the worker does: gRPC's received slices reuse freed heap memory instead of being
  // faulted in afresh (on a VM with ~11 us page faults a 64 MiB round took 1.3 s instead
  // of 69 ms: 8x slower than the worker ring this ceiling bounds).
  ringsync::KeepFreedHeapMemory();
  absl::ParseCommandLine(argc, argv);
  const std::optional<bench::PeerSweep> sweep = bench::ReadPeerSweep("grpc-ring-bench");
  if (!sweep) return 2;
  const std::string schedule = absl::GetFlag(FLAGS_schedule);
  const std::string api = absl::GetFlag(FLAGS_api);
  const bench::RingConfig c{absl::GetFlag(FLAGS_nranks), *sweep,
                            bench::ParseSize(absl::GetFlag(FLAGS_segment_bytes)),
                            schedule == "ring"};
  if (c.nranks < 2 || c.nranks > 64 || c.sweep.min_bytes < c.nranks || c.segment <= 0 ||
      (schedule != "free" && schedule != "ring") || (api != "callback" && api != "cq") ||
      c.sweep.collective != "allreduce") {
    std::fprintf(stderr, "grpc-ring-bench: bad flags (nranks 2..64, nranks <= min_bytes, "
                         "segment_bytes > 0, schedule free or ring, api callback or cq, "
                         "collective allreduce: "
                         "the ring moves an all-reduce's bytes)\n");
    return 2;
  }
  const int n = c.nranks;
  std::vector<int> to_rank(n), from_rank(n);
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int r = 0; r < n; ++r) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(down[1]);
      ::close(up[0]);
      _exit(api == "cq" ? bench::CqRankMain(c, down[0], up[1])
                        : bench::CallbackRankMain(c, down[0], up[1]));
    }
    ::close(down[0]);
    ::close(up[1]);
    to_rank[r] = down[1];
    from_rank[r] = up[0];
    pids.push_back(pid);
  }
  std::vector<std::string> ports(n);
  for (int r = 0; r < n; ++r) ports[r] = ReadLine(from_rank[r]);
  for (int r = 0; r < n; ++r) WriteLine(to_rank[r], ports[(r + 1) % n]);

  const double bus = 2.0 * (n - 1) / n;
  std::printf("# grpc-ring-bench: nranks %d, segment %lld B, %s schedule, %s API, zero-copy byte "
              "streams around the ring, 2(N-1)/N * size bytes per rank per round, no "
              "reduction\n",
              n, static_cast<long long>(c.segment), schedule.c_str(),
              api.c_str());
  std::printf("# time = max over ranks of (batch wall time / iters); busbw = algbw * %.3f\n#\n", bus);
  bench::PrintColumnHeads();
  int status = 0;
  for (int64_t size : bench::RingSizes(c)) {
    bool ok = true;
    for (int r = 0; r < n; ++r) ok = ok && ReadLine(from_rank[r]) == "ready";
    if (!ok) {
      status = 1;
      break;
    }
    for (int r = 0; r < n; ++r) WriteLine(to_rank[r], "go");
    double slowest = 0;
    for (int r = 0; r < n; ++r) {
      double t = 0;
      if (!absl::SimpleAtod(ReadLine(from_rank[r]), &t)) status = 1;
      slowest = std::max(slowest, t);
    }
    if (status != 0) break;
    bench::PrintRow(size, size, "bytes", "none", slowest, bus, 0);
  }
  for (int r = 0; r < n; ++r) ::close(to_rank[r]);
  for (pid_t pid : pids) {
    int rank_status = 0;
    if (waitpid(pid, &rank_status, 0) != pid || !WIFEXITED(rank_status) ||
        WEXITSTATUS(rank_status) != 0) {
      status = 1;
    }
  }
  return status;
}
