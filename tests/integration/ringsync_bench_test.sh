#!/usr/bin/env bash
# ringsync-bench checks what it measures: on a local cluster of three workers (an odd N,
# so an all-gather's blocks do not divide every size), each collective it times
# (all-reduce, broadcast, all-gather, reduce-scatter, scatter, gather, all-to-all, the
# uneven all-to-all), in plain
# and registered memory, across the sizes that take each of the SDK's paths (inline, the
# staging arena, shared memory), gives an
# exact result on every rank (#wrong 0 on every row, one row per size) and exits 0. A bad
# --collective (a barrier: nothing to time) is refused.
#
#   tests/integration/ringsync_bench_test.sh BUILD/bin
set -euo pipefail
BIN=$1
NRANKS=3
SWEEP=(--min_bytes=4 --max_bytes=4M --step_factor=16 --iters=2 --warmup_iters=1)
EXPECTED_ROWS=6  # 4 B, 64 B, 1 KiB, 16 KiB, 256 KiB, 4 MiB (rounded to 3 blocks where blocks:
                 # gathers, scatters, all-to-all; 4 B becomes 3 elements; to 6 shares for
                 # the uneven all-to-all)
WORK=$(mktemp -d /tmp/ringsync-bench-test-XXXXXX)
source "$(dirname "$0")/../../bench/local_cluster.sh"
source "$(dirname "$0")/bench_table_checks.sh"
fail() { echo "FAIL: $*" >&2; cat "$WORK"/out.rank* >&2; exit 1; }

start_local_cluster ""
run_bench() {  # flags...: one ringsync-bench per rank; rank 0's output in $WORK/out
  local status=0
  for r in "${!TARGETS[@]}"; do
    timeout 120 "$BIN/ringsync-bench" --worker="${TARGETS[$r]}" "$@" >"$WORK/out.rank$r" 2>&1 &
    BENCH_PIDS+=($!)
  done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" || status=1; done
  BENCH_PIDS=()
  cp "$WORK/out.rank0" "$WORK/out"
  return $status
}

for collective in allreduce broadcast allgather reducescatter scatter gather alltoall alltoallv; do
  for memory in "" --registered; do
    what="$collective${memory:+ $memory}"
    run_bench --collective="$collective" "${SWEEP[@]}" $memory || fail "$what: a rank exited non-zero"
    check_table "$WORK/out" "$what" "$EXPECTED_ROWS"
    grep -q "^# ringsync-bench $collective: nranks $NRANKS" "$WORK/out" || fail "$what: wrong heading"
    echo "$what: $EXPECTED_ROWS sizes, all exact"
  done
done

if "$BIN/ringsync-bench" --worker="${TARGETS[0]}" --collective=barrier >"$WORK/out.rank0" 2>&1; then
  fail "--collective=barrier was accepted"
fi
grep -q "bad --collective 'barrier'" "$WORK/out.rank0" || fail "no reason given for --collective=barrier"
echo "bad --collective refused"
