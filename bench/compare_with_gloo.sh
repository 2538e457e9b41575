#!/usr/bin/env bash
# ringsync vs torch.distributed Gloo, side by side on this machine, N = 4 over 127.0.0.1:
# starts a local ringsync cluster, runs one ringsync-bench per rank, records the workers'
# peak RSS, stops the cluster, runs bench/gloo_allreduce.py on the same sizes, and prints
# both tables and a joined one (ratio = ringsync busbw / gloo busbw, computed from the
# times, which are the same ratio at equal sizes and not rounded to 0.000 GB/s).
#
#   bench/compare_with_gloo.sh [BUILD_DIR]            # default: $BUILD_DIR or "build"
#   MIN_BYTES=4 MAX_BYTES=64K DTYPE=float16 OP=avg ITERS=50 bench/compare_with_gloo.sh
#   WORKER_FLAGS=--segment_bytes=4194304 bench/compare_with_gloo.sh   # comma-separated
#
# Needs BUILD_DIR/bin/{ringsyncd,ringsync-local-cluster,ringsync-bench} and
# /usr/bin/python3 with torch. Exit status: non-zero if either side failed or found
# wrong values.
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
NRANKS=${NRANKS:-4}
SIZES=(--min_bytes="${MIN_BYTES:-1M}" --max_bytes="${MAX_BYTES:-256M}"
       --step_factor="${STEP_FACTOR:-2}" --dtype="${DTYPE:-float32}" --op="${OP:-sum}"
       --iters="${ITERS:-20}" --warmup_iters="${WARMUP_ITERS:-5}" --check="${CHECK:-1}")
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bin
for b in ringsyncd ringsync-local-cluster ringsync-bench; do
  [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: build it (ninja -C $BUILD $b)" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/ringsync-compare-XXXXXX)
LAUNCHER=""
BENCH_PIDS=()
cleanup() {
  # Only what this script started, by PID; the launcher stops its own children.
  # A bench rank killed mid-collective leaves its SDK shared-memory file behind; the
  # name starts with its PID (client/src/shared_memory_region.h), so remove exactly those.
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; rm -f /dev/shm/ringsync-"$p"-*; done
  if [[ -n $LAUNCHER ]]; then kill -TERM "$LAUNCHER" 2>/dev/null || true; wait "$LAUNCHER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Debug logging: each worker logs one line per collective with its time and the bytes it
# sent and received on the ring, which the SDK does not report.
"$BIN/ringsync-local-cluster" --world_size="$NRANKS" --targets_file="$WORK/targets" \
  --pids_file="$WORK/pids" --worker_flags="--log_level=debug${WORKER_FLAGS:+,$WORKER_FLAGS}" >"$WORK/cluster.log" 2>&1 &
LAUNCHER=$!
for _ in $(seq 300); do
  [[ -s $WORK/targets ]] && break
  kill -0 "$LAUNCHER" 2>/dev/null || { cat "$WORK/cluster.log" >&2; exit 1; }
  sleep 0.1
done
[[ -s $WORK/targets ]] || { echo "cluster did not start in 30 s" >&2; exit 1; }
mapfile -t TARGETS <"$WORK/targets"
mapfile -t WORKER_PIDS <"$WORK/pids"

echo "== ringsync ($NRANKS workers: $BIN/ringsyncd)"
for r in "${!TARGETS[@]}"; do
  "$BIN/ringsync-bench" --worker="${TARGETS[$r]}" "${SIZES[@]}" >"$WORK/ringsync.$r.out" 2>&1 &
  BENCH_PIDS+=($!)
done
RS_STATUS=0
for p in "${BENCH_PIDS[@]}"; do wait "$p" || RS_STATUS=1; done
BENCH_PIDS=()
cat "$WORK/ringsync.0.out"
[[ $RS_STATUS == 0 ]] || { echo "ringsync-bench failed; other ranks said:" >&2; cat "$WORK"/ringsync.*.out >&2; }
# The launcher exits (stopping the cluster) when a worker dies; it says which and why.
kill -0 "$LAUNCHER" 2>/dev/null || { echo "the cluster stopped early:" >&2; cat "$WORK/cluster.log" >&2; }
if [[ $RS_STATUS != 0 ]]; then  # keep the daemons' logs: the cluster removes its directory
  KEEP=$(mktemp -d /tmp/ringsync-compare-logs-XXXXXX)
  cp "$(dirname "${TARGETS[0]#unix:}")"/*.log "$WORK"/*.out "$KEEP"/ 2>/dev/null || true
  echo "daemon and bench logs kept in $KEEP" >&2
fi

# VmHWM: the worker's peak resident set over its whole life, read before it stops.
RSS_LINE="worker peak RSS (VmHWM), MiB:"
for p in "${WORKER_PIDS[@]}"; do
  RSS_LINE+=$(awk '/^VmHWM:/ { printf " %.1f", $2 / 1024 }' "/proc/$p/status" 2>/dev/null || echo " ?")
done
# The warm-up and timed collectives of the largest size, from each worker's log (read
# before the cluster stops and removes its directory): time inside the worker, ring bytes.
LARGEST=$(awk '$1 !~ /^#/ && NF == 8 { s = $1 } END { print s }' "$WORK/ringsync.0.out")
RING_LINES=()
for log in "$(dirname "${TARGETS[0]#unix:}")"/w*.log; do
  RING_LINES+=("$(awk -v name="'bench/allreduce/$LARGEST'" -v w="$(basename "$log" .log)" -v size="$LARGEST" '
    index($0, name) && / done in / {
      d = $0; sub(/.* done in /, "", d); sub(/:.*/, "", d)
      f = d ~ /ms$/ ? 1e-3 : d ~ /us$/ ? 1e-6 : d ~ /ns$/ ? 1e-9 : 1; sub(/[a-z]+$/, "", d)
      t += d * f; n++; match($0, /sent [0-9]+ B, received [0-9]+ B/); b = substr($0, RSTART, RLENGTH) }
    END { if (n) printf "  %s: %d x %s B, %.1f ms each inside the worker, %s on the ring",
                        w, n, size, t / n * 1e3, b }' "$log")")
done
kill -TERM "$LAUNCHER"; wait "$LAUNCHER" || true; LAUNCHER=""

echo; echo "== torch.distributed gloo ($NRANKS processes)"
GLOO_STATUS=0
/usr/bin/python3 "$HERE/gloo_allreduce.py" --nranks="$NRANKS" "${SIZES[@]}" \
  >"$WORK/gloo.out" 2>&1 || GLOO_STATUS=1
cat "$WORK/gloo.out"

echo; echo "== side by side: N=$NRANKS, ${DTYPE:-float32} ${OP:-sum}, time = max over ranks"
# Data rows are the lines not starting with '#': size count type redop time algbw busbw wrong.
awk 'FNR == NR { if ($1 !~ /^#/ && NF == 8) { t[$1] = $5; b[$1] = $7; w[$1] = $8 } next }
     FNR == 1 { printf "%12s  %12s %12s  %12s %12s  %8s\n", "size (B)", "ringsync us", "busbw GB/s",
                       "gloo us", "busbw GB/s", "ratio" }
     $1 !~ /^#/ && NF == 8 && ($1 in t) {
       printf "%12s  %12s %12s  %12s %12s  %8.2f%s\n", $1, t[$1], b[$1], $5, $7,
              (t[$1] > 0 ? $5 / t[$1] : 0), (w[$1] + $8 > 0 ? "  WRONG VALUES" : "") }' \
  "$WORK/ringsync.0.out" "$WORK/gloo.out"
echo "$RSS_LINE"
echo "worker log, warm-up + timed all-reduces of the largest size:"; printf '%s\n' "${RING_LINES[@]}"
grep -h "peak RSS" "$WORK/ringsync.0.out" "$WORK/gloo.out" || true
[[ $RS_STATUS == 0 && $GLOO_STATUS == 0 ]]
