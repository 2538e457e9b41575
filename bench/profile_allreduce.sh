#!/usr/bin/env bash
# Where each CPU-second of a large all-reduce goes inside the workers: starts a local
# cluster of NRANKS workers, loops SIZE all-reduces through one ringsync-bench per rank,
# samples the workers with `perf record -g` (Debian: linux-perf) for SECONDS_ seconds, and
# prints the share of the workers' samples per category (the first rule that matches a
# sample's stack wins; kernel stacks are exact, user-space stacks of a build without
# frame pointers are often only the leaf function).
#
#   sudo bench/profile_allreduce.sh [BUILD_DIR]                 # 64 MiB, N=4, 8 s
#   SIZE=256M WORKER_FLAGS=--segment_bytes=4194304 bench/profile_allreduce.sh build
#
# Needs root (or perf_event_paranoid <= 0), BUILD_DIR/bin/{ringsync-local-cluster,
# ringsync-bench,ringsyncd} and /usr/bin/python3. perf.data is left in $OUT (default a
# fresh /tmp/ringsync-profile-XXXXXX) for `perf report -i`.
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
BIN=$BUILD/bin
NRANKS=${NRANKS:-4}
OUT=${OUT:-$(mktemp -d /tmp/ringsync-profile-XXXXXX)}
command -v perf >/dev/null || { echo "perf not found (Debian: linux-perf)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/ringsync-profile-run-XXXXXX)
source "$(dirname "$0")/local_cluster.sh"
start_local_cluster "${WORKER_FLAGS:-}"
for r in "${!TARGETS[@]}"; do
  "$BIN/ringsync-bench" --worker="${TARGETS[$r]}" --min_bytes="${SIZE:-64M}" --max_bytes="${SIZE:-64M}" \
    --iters="${ITERS:-30}" --warmup_iters=2 --check=0 >"$WORK/bench.$r" 2>&1 &
  BENCH_PIDS+=($!)
done
sleep "${SETTLE:-4}"  # past the warm-up
perf record -F 999 -g -p "$(IFS=,; echo "${WORKER_PIDS[*]}")" -o "$OUT/perf.data" \
  -- sleep "${SECONDS_:-8}" 2>"$OUT/perf.log" || { cat "$OUT/perf.log" >&2; exit 1; }
for p in "${BENCH_PIDS[@]}"; do wait "$p" || true; done
BENCH_PIDS=()
grep -v '^#' "$WORK/bench.0" | grep . || true

perf script -i "$OUT/perf.data" -F ip,sym,dso 2>/dev/null | /usr/bin/python3 -c '
import collections, re, sys
RULES = [  # (category, regex over the whole stack), first match wins
  ("worker copy of the client shared tensor in/out (pread/pwrite)", r"sys_pread64|sys_pwrite64"),
  ("kernel TCP receive (recvmsg, copy to user)", r"sys_recvmsg|tcp_recvmsg"),
  ("kernel TCP send (sendmsg, copy from user, loopback)", r"sys_sendmsg|tcp_sendmsg"),
  ("futex: thread wake-ups and waits", r"sys_futex|futex_wait|futex_wake"),
  ("epoll", r"epoll|sys_poll"),
  ("page faults: fresh memory", r"exc_page_fault|handle_mm_fault"),
  ("mmap/munmap", r"sys_munmap|sys_mmap|sys_madvise"),
  ("memset (zero-filling)", r"__memset"),
  ("memcpy/memmove in user space", r"__memmove|__memcpy"),
  ("reduction (CpuReducer kernels)", r"CombineVec|cpu_kernels|CpuReducer"),
  ("absl Mutex (and its deadlock-detection graph)", r"absl::\S*(Mutex|CondVar|GraphCycles|Synch|Waiter)"),
  ("malloc/free", r"malloc|_int_free|cfree|tcache"),
  ("protobuf", r"google::protobuf"),
  ("gRPC core (HTTP/2 framing, slices, closures)", r"grpc|chttp2"),
  ("other kernel", r"kernel\.kallsyms"),
]
counts, total, stack = collections.Counter(), 0, []
def flush():
    global total, stack
    if stack:
        total += 1
        text = "\n".join(stack)
        counts[next((n for n, rx in RULES if re.search(rx, text)), "other user space")] += 1
    stack = []
for line in sys.stdin:
    if line.strip(): stack.append(line.strip())
    else: flush()
flush()
print("| where the workers CPU samples went | share |\n|---|---|")
for name, n in counts.most_common():
    print(f"| {name} | {100.0 * n / max(total, 1):.1f}% |")
print(f"| (samples: {total}) | |")
'
echo "perf data: $OUT/perf.data"
