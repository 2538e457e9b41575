#!/usr/bin/env bash
# What a collective costs the workers in CPU, thread switches and page faults: starts a
# local cluster of NRANKS workers, runs ITERS all-reduces of SIZE through one
# ringsync-bench per rank, and reads the workers' utime+stime, every thread's voluntary +
# involuntary context switches and minor page faults from /proc before and after. Prints
# the totals over the workers per collective (warm-ups included in the count), and with
# PER_THREAD=1 CPU and switches per thread of rank 1's worker (threads by name; gRPC names
# its own).
#
#   bench/worker_cpu.sh [BUILD_DIR]                                  # 64 MiB, N=4, gRPC path
#   SIZE=4 ITERS=2000 WORKER_FLAGS= bench/worker_cpu.sh build         # 4 B, default path
#
# WORKER_FLAGS (comma-separated, default --peer_transport=grpc), BENCH_FLAGS (default
# --registered: no SDK copies, so the workers' own cost), CLUSTER_FLAGS
# (ringsync-local-cluster's, e.g. --security=tls: mutual TLS instead of the cluster
# token). Linux only (/proc).
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
BIN=$BUILD/bin
NRANKS=${NRANKS:-4}
SIZE=${SIZE:-64M}
ITERS=${ITERS:-20}
WARMUP_ITERS=${WARMUP_ITERS:-2}
WORK=$(mktemp -d /tmp/ringsync-worker-cpu-XXXXXX)
source "$(dirname "$0")/local_cluster.sh"
start_local_cluster "${WORKER_FLAGS---peer_transport=grpc}"

# One line per thread of the workers: "pid tid name cpu_ticks switches minor_faults". A
# thread that ends while it is read is skipped.
threads() {
  local pid dir
  for pid in "${WORKER_PIDS[@]}"; do
    for dir in "/proc/$pid/task"/*; do
      [[ -d $dir ]] || continue
      local tid=${dir##*/}
      { read -r name <"$dir/comm" &&
        stat=$(<"$dir/stat") &&
        switches=$(awk '/ctxt_switches/ { s += $2 } END { print s }' "$dir/status"); } 2>/dev/null ||
        continue
      # Fields after the name's closing parenthesis: minflt is the 8th, utime and stime the
      # 12th and 13th.
      read -r -a after <<<"${stat##*) }"
      echo "$pid $tid ${name// /_} $((after[11] + after[12])) $switches ${after[7]}"
    done
  done
}

threads >"$WORK/before"
for r in "${!TARGETS[@]}"; do
  # shellcheck disable=SC2086
  "$BIN/ringsync-bench" --worker="${TARGETS[$r]}" --min_bytes="$SIZE" --max_bytes="$SIZE" \
    --iters="$ITERS" --warmup_iters="$WARMUP_ITERS" --check=0 ${BENCH_FLAGS---registered} \
    --linger=10s >"$WORK/bench.$r" 2>&1 &
  BENCH_PIDS+=($!)
done
# Read while the clients are still attached (they linger once rank 0 printed its last
# line): the thread that serves a client's call channel, which also runs its collectives
# when the worker is idle, ends with the client.
while ! grep -q '^# Client (bench process) peak RSS' "$WORK/bench.0"; do
  kill -0 "${BENCH_PIDS[0]}" 2>/dev/null || break
  sleep 0.05
done
threads >"$WORK/after"
for p in "${BENCH_PIDS[@]}"; do
  kill "$p" 2>/dev/null || true
  wait "$p" || true
  rm -f /dev/shm/ringsync-"$p"-*
done
BENCH_PIDS=()

grep -v '^#' "$WORK/bench.0" | grep . || true
# How many collectives of SIZE ran (ringsync-bench caps large sizes at 1 GiB per batch).
COLLECTIVES=$(sed -n 's/^# Collectives per rank: \([0-9]*\) of the swept sizes.*/\1/p' "$WORK/bench.0")
if [[ -z $COLLECTIVES ]]; then
  echo "worker_cpu: ringsync-bench did not say how many collectives it ran:" >&2
  cat "$WORK/bench.0" >&2
  exit 1
fi
/usr/bin/env python3 - "$WORK/before" "$WORK/after" "$COLLECTIVES" \
  "$(getconf CLK_TCK)" "${WORKER_PIDS[1]:-${WORKER_PIDS[0]}}" "${PER_THREAD:-0}" <<'PY'
import collections, sys
before_path, after_path, count, ticks, shown_pid, per_thread = sys.argv[1:]
count, ticks = int(count), int(ticks)
def load(path):
    rows = {}
    for line in open(path):
        pid, tid, name, cpu, switches, faults = line.split()
        rows[(pid, tid)] = (name, int(cpu), int(switches), int(faults))
    return rows
before, after = load(before_path), load(after_path)
cpu = switches = faults = 0
threads = collections.defaultdict(lambda: [0, 0])
for key, (name, c, s, f) in after.items():
    _, c0, s0, f0 = before.get(key, (name, 0, 0, 0))  # a thread started meanwhile counts whole
    cpu += c - c0
    switches += s - s0
    faults += f - f0
    if key[0] == shown_pid:
        threads[name][0] += c - c0
        threads[name][1] += s - s0
def ms(t):  # CPU ticks per collective, readable from 4 B to 256 MiB
    v = t * 1000 / ticks / count
    return f"{v * 1000:.0f} us" if v < 10 else f"{v:.1f} ms"
print(f"# workers, per collective ({count} collectives): CPU {ms(cpu)}, "
      f"thread switches {switches / count:.0f}, page faults {faults / count:.0f}")
if per_thread == "1":
    print(f"# worker pid {shown_pid}, per collective, by thread name:")
    for name, (c, s) in sorted(threads.items(), key=lambda kv: -kv[1][1]):
        if c or s:
            print(f"#   {name:<18} CPU {ms(c):>9}  switches {s / count:6.0f}")
PY
