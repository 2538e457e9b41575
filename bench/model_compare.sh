#!/usr/bin/env bash
# A model's gradient all-reduce per training step: ringsync (async calls fused, one grouped
# call, one flat all-reduce) vs torch.distributed Gloo (per-tensor all_reduce, DDP-style
# 25 MiB buckets, one flat all-reduce), N = 4 over 127.0.0.1, the two alternating ROUNDS
# times in one run; prints each round's medians and the median over rounds, with ratios.
#
#   bench/model_compare.sh [BUILD_DIR]                       # ResNet-50
#   SHAPES=bench/models/bert_base.shapes STEPS=3 ROUNDS=2 bench/model_compare.sh
#   FUSION_THRESHOLD=134217728 WORKER_FLAGS=--segment_bytes=4194304 bench/model_compare.sh
#
# Needs BUILD_DIR/bin/{ringsyncd,ringsync-local-cluster,ringsync-model-bench} and
# /usr/bin/python3 with torch. Exit status non-zero if a side failed or got a wrong sum.
set -euo pipefail

BUILD=${1:-${BUILD_DIR:-build}}
NRANKS=${NRANKS:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
SHAPES=${SHAPES:-$HERE/models/resnet50.shapes}
STEPS=${STEPS:-7}
WARMUP=${WARMUP_STEPS:-2}
ROUNDS=${ROUNDS:-3}
BIN=$BUILD/bin
for b in ringsyncd ringsync-local-cluster ringsync-model-bench; do
  [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: build it (ninja -C $BUILD $b)" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/ringsync-model-XXXXXX)
source "$HERE/local_cluster.sh"
start_local_cluster "${WORKER_FLAGS:-}"

STATUS=0
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for r in "${!TARGETS[@]}"; do
    "$BIN/ringsync-model-bench" --worker="${TARGETS[$r]}" --shapes="$SHAPES" --steps="$STEPS" \
      --warmup_steps="$WARMUP" ${FUSION_THRESHOLD:+--fusion_threshold_bytes=$FUSION_THRESHOLD} \
      >"$WORK/rs.$r.out" 2>&1 &
    BENCH_PIDS+=($!)
  done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" || STATUS=1; done
  BENCH_PIDS=()
  cat "$WORK/rs.0.out" | tee -a "$WORK/all.out"
  [[ $STATUS == 0 ]] || { cat "$WORK"/rs.*.out >&2; exit 1; }
  /usr/bin/python3 "$HERE/model_gloo.py" --nranks="$NRANKS" --shapes="$SHAPES" --steps="$STEPS" \
    --warmup_steps="$WARMUP" | tee -a "$WORK/all.out" || STATUS=1
done

echo "== median over $ROUNDS rounds of each round's median step time (ms)"
awk '
  /^(ringsync|gloo) / { key = $1 " " $2; t[key] = t[key] " " $4; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
  function median(s,   a, k, i, j, x) {
    k = split(s, a, " ")
    for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= n; i++) m[order[i]] = median(t[order[i]])
    printf "%-22s %10s %14s %16s\n", "mode", "step (ms)", "/ rs single", "/ gloo bucketed"
    for (i = 1; i <= n; i++) {
      k = order[i]
      printf "%-22s %10.1f %14.3f %16.3f\n", k, m[k], m[k] / m["ringsync single"], m[k] / m["gloo bucketed"]
    }
  }' "$WORK/all.out"
exit $STATUS
