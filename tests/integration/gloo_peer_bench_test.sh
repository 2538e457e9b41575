#!/usr/bin/env bash
# gloo-peer-bench (the Gloo C++ peer of bench/compare_with_gloo.sh) checks what it
# measures: at N=3 each collective it times (gloo::allreduce, gloo::broadcast,
# gloo::allgather, gloo::scatter, gloo::gather, gloo::alltoall,
# gloo::ReduceScatterHalvingDoubling: N=3 is not a power of two, gloo::alltoallv) gives an
# exact result on
# every rank at every size (#wrong 0 on every row, one row per size), and the run exits 0.
# Bad sweep flags (a collective the peers do not time) are refused.
#
#   tests/integration/gloo_peer_bench_test.sh BUILD/bin/gloo-peer-bench
set -euo pipefail
BENCH=$1
SWEEP=(--nranks=3 --min_bytes=4 --max_bytes=1M --step_factor=8 --iters=2 --warmup_iters=1
       --timeout=60s)
EXPECTED_ROWS=7  # 4 B, 32 B, 256 B, 2 KiB, 16 KiB, 128 KiB, 1 MiB (all but the all-reduce's
                 # and broadcast's rounded to 3 blocks: 4 B becomes 3 elements)
OUT=$(mktemp /tmp/gloo-peer-bench-test-XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$OUT" >&2; exit 1; }
source "$(dirname "$0")/bench_table_checks.sh"

for collective in allreduce broadcast allgather scatter gather alltoall reducescatter alltoallv; do
  rows=$EXPECTED_ROWS
  # The uneven all-to-all rounds to 6 shares (N(N+1)/2): 4 B and 32 B both become 6 elements.
  [[ $collective == alltoallv ]] && rows=$((EXPECTED_ROWS - 1))
  timeout 120 "$BENCH" --collective="$collective" "${SWEEP[@]}" >"$OUT" 2>&1 \
    || fail "$collective: exited $?"
  check_table "$OUT" "$collective" "$rows"
  grep -q "^# gloo-peer-bench $collective: nranks 3" "$OUT" || fail "$collective: wrong heading"
  echo "$collective: $rows sizes, all exact"
done

if "$BENCH" --collective=barrier >"$OUT" 2>&1; then
  fail "--collective=barrier was accepted"
fi
echo "bad sweep flags refused"
