#!/usr/bin/env bash
# ringsync vs its peers, side by side on this machine, N ranks over 127.0.0.1, in one run:
#  * ringsync: a local cluster (N workers) and one ringsync-bench per rank;
#  * Gloo C++: gloo-peer-bench (gloo::allreduce over Gloo's TCP transport; built where
#    libgloo-dev is installed);
#  * torch Gloo: bench/gloo_allreduce.py (torch.distributed, backend gloo);
#  * OpenMPI: mpi-peer-bench (MPI_Allreduce in place; built where libopenmpi-dev is
#    installed) under mpirun, twice: mpi-tcp over its TCP transport (btl tcp,self on lo)
#    and mpi-shm over its shared-memory transport (btl vader,self); mpirun's own
#    out-of-band channel stays on lo too. MPIRUN_FLAGS adds mpirun options (e.g.
#    "--mca btl_vader_single_copy_mechanism none" where cross-process reads are denied);
#  * on request (PEERS=...), grpc-ring: grpc-ring-bench, the bare gRPC byte-streaming ring
#    (the transport's ceiling; SEGMENT_BYTES should match the workers' --segment_bytes),
#    and grpc-ring-sched: the same bytes under a ring all-reduce's schedule (a segment
#    leaves only once the one it forwards arrived; --schedule=ring), still unreduced;
#    grpc-ring-cq: that scheduled ring driven by one thread per rank through a gRPC
#    completion queue instead of gRPC's callback threads (--api=cq).
# The same sizes run ROUNDS times, the peers interleaved (the order rotates each round, so
# no peer always runs first or last on a machine whose load drifts); the joined table gives
# each peer's median time per size and ringsync's time ratio to each peer (< 1: ringsync
# is faster). Every result is checked (#wrong) unless CHECK=0. COLLECTIVE=broadcast,
# allgather, scatter, gather, alltoall, alltoallv or reducescatter times that collective
# instead of the all-reduce (ringsync, Gloo C++ and MPI; an all-gather's or gather's size is
# its whole result, a scatter's the root's input, an all-to-all's or reduce-scatter's each
# rank's input, nccl-tests' busbw factors; alltoallv: uneven blocks, rank q sending rank r
# 1 + (r - q) mod N shares, bench/bench_table.h; ringsync's all-to-all runs in place, the
# peers' from an input into an output; the peers' reduce-scatters run in place,
# ringsync's into a block of its own: Gloo C++ ReduceScatterHalvingDoubling,
# MPI_Reduce_scatter_block).
#
#   bench/compare_with_gloo.sh [BUILD_DIR]            # default: $BUILD_DIR or "build"
#   MIN_BYTES=16M MAX_BYTES=256M ROUNDS=3 bench/compare_with_gloo.sh
#   PEERS="ringsync gloo-cpp" MIN_BYTES=4 MAX_BYTES=64K ITERS=50 bench/compare_with_gloo.sh
#   PEERS="ringsync gloo-cpp torch-gloo grpc-ring" MIN_BYTES=16M bench/compare_with_gloo.sh
#   PEERS="ringsync gloo-cpp mpi-tcp mpi-shm" MIN_BYTES=16M bench/compare_with_gloo.sh
#   WORKER_FLAGS=--segment_bytes=4194304 bench/compare_with_gloo.sh   # comma-separated
#   BENCH_FLAGS=--registered bench/compare_with_gloo.sh   # ringsync-bench in a Client::Allocate buffer
#   BENCH_FLAGS=--registered WORKER_FLAGS=--peer_transport=grpc bench/compare_with_gloo.sh
#   CLUSTER_FLAGS=--security=tls bench/compare_with_gloo.sh   # mutual TLS, not the cluster token
#   COLLECTIVE=allgather PEERS="ringsync gloo-cpp" MIN_BYTES=1M bench/compare_with_gloo.sh
#   COLLECTIVE=alltoall BENCH_FLAGS=--registered PEERS="ringsync gloo-cpp" bench/compare_with_gloo.sh
#
# Needs BUILD_DIR/bin/{ringsyncd,ringsync-local-cluster,ringsync-bench}, for the Gloo C++
# column BUILD_DIR/bin/gloo-peer-bench, for the torch column /usr/bin/python3 with torch,
# for the MPI columns BUILD_DIR/bin/mpi-peer-bench and mpirun (OpenMPI) on PATH.
# Exit status: non-zero if any run failed or found wrong values.
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
NRANKS=${NRANKS:-4}
ROUNDS=${ROUNDS:-3}
COLLECTIVE=${COLLECTIVE:-allreduce}
SIZES=(--min_bytes="${MIN_BYTES:-1M}" --max_bytes="${MAX_BYTES:-256M}"
       --step_factor="${STEP_FACTOR:-2}" --dtype="${DTYPE:-float32}" --op="${OP:-sum}"
       --iters="${ITERS:-20}" --warmup_iters="${WARMUP_ITERS:-5}" --check="${CHECK:-1}")
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bin
for b in ringsyncd ringsync-local-cluster ringsync-bench; do
  [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: build it (ninja -C $BUILD $b)" >&2; exit 2; }
done
DEFAULT_PEERS="ringsync"
if [[ -x $BIN/gloo-peer-bench ]]; then DEFAULT_PEERS+=" gloo-cpp"
else echo "no $BIN/gloo-peer-bench (install libgloo-dev and rebuild): no Gloo C++ column" >&2; fi
if [[ $COLLECTIVE == allreduce ]] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  DEFAULT_PEERS+=" torch-gloo"
fi
if [[ -x $BIN/mpi-peer-bench ]] && command -v mpirun >/dev/null; then DEFAULT_PEERS+=" mpi-tcp mpi-shm"
else echo "no $BIN/mpi-peer-bench or mpirun (install libopenmpi-dev openmpi-bin and rebuild): no MPI columns" >&2; fi
read -r -a PEERS <<<"${PEERS:-$DEFAULT_PEERS}"
if [[ $COLLECTIVE != allreduce ]]; then
  for peer in "${PEERS[@]}"; do
    case $peer:$COLLECTIVE in
      ringsync:*) ;;
      gloo-cpp:broadcast|gloo-cpp:allgather|gloo-cpp:scatter|gloo-cpp:gather|gloo-cpp:alltoall) ;;
      gloo-cpp:reducescatter|gloo-cpp:alltoallv) ;;
      mpi-*:broadcast|mpi-*:allgather|mpi-*:scatter|mpi-*:gather|mpi-*:alltoall) ;;
      mpi-*:reducescatter|mpi-*:alltoallv) ;;
      *) echo "$peer does not time a $COLLECTIVE here" >&2; exit 2 ;;
    esac
  done
fi

WORK=$(mktemp -d /tmp/ringsync-compare-XXXXXX)
source "$HERE/local_cluster.sh"
# Debug logging: each worker logs one line per collective with its time and the bytes it
# sent and received on the ring, which the SDK does not report.
start_local_cluster "--log_level=debug${WORKER_FLAGS:+,$WORKER_FLAGS}"
LOG_DIR=$(dirname "${TARGETS[0]#unix:}")

FAILED=0
run_ringsync() {  # $1: output file
  local status=0
  for r in "${!TARGETS[@]}"; do
    "$BIN/ringsync-bench" --worker="${TARGETS[$r]}" --collective="$COLLECTIVE" "${SIZES[@]}" ${BENCH_FLAGS:-} >"$1.rank$r" 2>&1 &
    BENCH_PIDS+=($!)
  done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" || status=1; done
  BENCH_PIDS=()
  cp "$1.rank0" "$1"
  if [[ $status != 0 ]]; then
    echo "ringsync-bench failed; its ranks said:" >&2; cat "$1".rank* >&2
    # The launcher exits (stopping the cluster) when a worker dies; it says which and why.
    kill -0 "$LAUNCHER" 2>/dev/null || { echo "the cluster stopped early:" >&2; cat "$WORK/cluster.log" >&2; }
    local keep; keep=$(mktemp -d /tmp/ringsync-compare-logs-XXXXXX)
    cp "$LOG_DIR"/*.log "$1".rank* "$keep"/ 2>/dev/null || true
    echo "daemon and bench logs kept in $keep" >&2
  fi
  return $status
}
# OpenMPI's launcher, loopback only, ranks not pinned to cores (like every other peer's
# processes); --allow-run-as-root because CI and containers run as root.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NRANKS" --bind-to none
        --mca oob_tcp_if_include lo --mca pml ob1)
read -r -a MPIRUN_EXTRA <<<"${MPIRUN_FLAGS:-}"
MPIRUN+=("${MPIRUN_EXTRA[@]}")
run_mpi() {  # $1: mpirun's transport options, $2: output file
  local status=0
  # In the background so that the EXIT trap can stop mpirun (it stops its ranks).
  # shellcheck disable=SC2086
  "${MPIRUN[@]}" $1 "$BIN/mpi-peer-bench" --collective="$COLLECTIVE" "${SIZES[@]}" >"$2" 2>&1 &
  BENCH_PIDS+=($!)
  wait "$!" || status=1
  BENCH_PIDS=()
  return $status
}
run_peer() {  # $1: peer, $2: output file
  case $1 in
    ringsync) run_ringsync "$2" ;;
    gloo-cpp) "$BIN/gloo-peer-bench" --nranks="$NRANKS" --collective="$COLLECTIVE" "${SIZES[@]}" >"$2" 2>&1 ;;
    torch-gloo) /usr/bin/python3 "$HERE/gloo_allreduce.py" --nranks="$NRANKS" "${SIZES[@]}" >"$2" 2>&1 ;;
    grpc-ring) "$BIN/grpc-ring-bench" --nranks="$NRANKS" "${SIZES[@]}" \
                 --segment_bytes="${SEGMENT_BYTES:-1M}" >"$2" 2>&1 ;;
    grpc-ring-sched) "$BIN/grpc-ring-bench" --nranks="$NRANKS" "${SIZES[@]}" \
                       --segment_bytes="${SEGMENT_BYTES:-1M}" --schedule=ring >"$2" 2>&1 ;;
    grpc-ring-cq) "$BIN/grpc-ring-bench" --nranks="$NRANKS" "${SIZES[@]}" \
                    --segment_bytes="${SEGMENT_BYTES:-1M}" --schedule=ring --api=cq >"$2" 2>&1 ;;
    mpi-tcp) run_mpi "--mca btl tcp,self --mca btl_tcp_if_include lo" "$2" ;;
    mpi-shm) run_mpi "--mca btl vader,self" "$2" ;;
    *) echo "unknown peer '$1' (ringsync, gloo-cpp, torch-gloo, grpc-ring, grpc-ring-sched," \
            "grpc-ring-cq, mpi-tcp, mpi-shm)" >&2
       return 2 ;;
  esac
}

for ((round = 0; round < ROUNDS; ++round)); do
  for ((k = 0; k < ${#PEERS[@]}; ++k)); do
    peer=${PEERS[$(((round + k) % ${#PEERS[@]}))]}
    out="$WORK/$peer.$round.out"
    echo "== round $((round + 1))/$ROUNDS: $peer" >&2
    if ! run_peer "$peer" "$out"; then FAILED=1; cat "$out" >&2; fi
  done
done

# VmHWM: the worker's peak resident set over its whole life, read before it stops.
RSS_LINE="worker peak RSS (VmHWM), MiB:"
for p in "${WORKER_PIDS[@]}"; do
  RSS_LINE+=$(awk '/^VmHWM:/ { printf " %.1f", $2 / 1024 }' "/proc/$p/status" 2>/dev/null || echo " ?")
done
# The all-reduces of the largest size, from each worker's log (read before the cluster
# stops and removes its directory): time inside the worker and how much of it the ring
# waited for a plain span's input to be copied in (medians: the first, warm-up, call also
# maps and faults in the staging memory), bytes on the ring.
RING_LINES=()
if [[ -s $WORK/ringsync.0.out ]]; then
  LARGEST=$(awk '$1 !~ /^#/ && NF == 8 { s = $1 } END { print s }' "$WORK/ringsync.0.out")
  for log in "$LOG_DIR"/w*.log; do
    RING_LINES+=("$(awk -v name="'bench/$COLLECTIVE/$LARGEST'" -v w="$(basename "$log" .log)" -v size="$LARGEST" '
      function seconds(d,  f) {  # absl::FormatDuration: 0, 250us, 1.5ms, 2s
        f = d ~ /ms$/ ? 1e-3 : d ~ /us$/ ? 1e-6 : d ~ /ns$/ ? 1e-9 : 1; sub(/[a-z]+$/, "", d)
        return d * f }
      function median(v, n,  i, j, x) {  # sorts v[1..n] in place (mawk has no asort)
        for (i = 2; i <= n; i++) {
          x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
      index($0, name) && / done in / {
        d = $0; sub(/.* done in /, "", d); sub(/:.*/, "", d); took[++n] = seconds(d)
        match($0, /sent [0-9]+ B, received [0-9]+ B/); b = substr($0, RSTART, RLENGTH)
        waited[n] = 0
        if (match($0, /[^ ]+ waiting for the input/)) {
          d = substr($0, RSTART, RLENGTH); sub(/ .*/, "", d); waited[n] = seconds(d) } }
      END { if (n) printf "  %s: %d x %s B, median %.1f ms inside the worker, %.2f ms of it " \
                          "waiting for the input; %s on the ring",
                          w, n, size, median(took, n) * 1e3, median(waited, n) * 1e3, b }' "$log")")
  done
fi
stop_local_cluster

for peer in "${PEERS[@]}"; do
  echo "== $peer, round 1 of $ROUNDS"; cat "$WORK/$peer.0.out" 2>/dev/null || true; echo
done

echo "== side by side: N=$NRANKS, $COLLECTIVE ${DTYPE:-float32}${OP:+ $OP}, median over $ROUNDS rounds of" \
     "(time = max over ranks); ratio = ringsync time / peer time (< 1: ringsync faster)"
/usr/bin/python3 - "$WORK" "$ROUNDS" "$NRANKS" "$COLLECTIVE" "${PEERS[@]}" <<'PY'
import re, statistics, sys
work, rounds, n, collective = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
peers = sys.argv[5:]
times, bus, wrong, sizes = {}, {}, {}, []
# Each bench states its busbw factor in its heading ("busbw = algbw * ... = algbw * F").
factor = re.compile(r"busbw = algbw \* (?:.*= algbw \* )?([0-9.]+)")
for peer in peers:
    for r in range(rounds):
        try:
            lines = open(f"{work}/{peer}.{r}.out").read().splitlines()
        except OSError:
            continue
        for line in lines:
            if m := factor.search(line):
                bus[peer] = float(m.group(1))
            f = line.split()
            if len(f) != 8 or line.startswith("#") or not f[0].isdigit():
                continue
            size = int(f[0])
            if size not in sizes:
                sizes.append(size)
            times.setdefault((peer, size), []).append(float(f[4]))
            wrong[(peer, size)] = wrong.get((peer, size), 0) + int(f[7])
def fmt_time(us):
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} us"
head = f"{'size (B)':>12}"
for peer in peers:
    head += f"  {peer + ' time':>16} {'busbw GB/s':>10}"
others = [p for p in peers if p != "ringsync"]
if "ringsync" in peers:
    for p in others:
        head += f"  {'rs/' + p:>14}"
print(head)
for size in sorted(sizes):
    row, med = f"{size:>12}", {}
    for peer in peers:
        t = times.get((peer, size))
        if not t:
            row += f"  {'-':>16} {'-':>10}"
            continue
        med[peer] = statistics.median(t)
        busbw = f"{size / med[peer] / 1e3 * bus[peer]:.3f}" if peer in bus else "-"
        row += f"  {fmt_time(med[peer]):>16} {busbw:>10}"
    if "ringsync" in med:
        for p in others:
            row += f"  {med['ringsync'] / med[p]:>14.2f}" if p in med else f"  {'-':>14}"
    bad = [p for p in peers if wrong.get((p, size), 0)]
    print(row + (f"  WRONG VALUES: {' '.join(bad)}" if bad else ""))
PY
echo "$RSS_LINE"
if ((${#RING_LINES[@]})); then
  echo "worker log, every $COLLECTIVE of the largest size (all rounds, warm-up included):"
  printf '%s\n' "${RING_LINES[@]}"
fi
grep -h "peak RSS" "$WORK"/*.0.out || true
[[ $FAILED == 0 ]]
