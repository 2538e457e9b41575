#!/usr/bin/env bash
# grpc-ring-bench (the bare gRPC ring that bench/compare_with_gloo.sh shows as grpc-ring,
# grpc-ring-sched and grpc-ring-cq) streams every round to the end under each schedule and
# each gRPC API: at N=3 every size gets its row, the heading says which ring ran, and the
# run exits 0 (a rank that lost a message would wait for it until the test's timeout).
# Flags naming no schedule or API are refused.
#
#   tests/integration/grpc_ring_bench_test.sh BUILD/bin/grpc-ring-bench
set -euo pipefail
BENCH=$1
SWEEP=(--nranks=3 --min_bytes=4K --max_bytes=1M --step_factor=16 --iters=2 --warmup_iters=1
       --segment_bytes=64K)
EXPECTED_ROWS=3  # 4 KiB, 64 KiB, 1 MiB: below, at and across several segments a chunk
OUT=$(mktemp /tmp/grpc-ring-bench-test-XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$OUT" >&2; exit 1; }

for api in callback cq; do
  for schedule in free ring; do
    timeout 120 "$BENCH" "${SWEEP[@]}" --api="$api" --schedule="$schedule" >"$OUT" 2>&1 \
      || fail "$api/$schedule: exited $?"
    rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 8 && $3 == "bytes"' "$OUT" | wc -l)
    [[ $rows == "$EXPECTED_ROWS" ]] || fail "$api/$schedule: $rows rows, expected $EXPECTED_ROWS"
    grep -q "^# grpc-ring-bench: nranks 3, segment 65536 B, $schedule schedule, $api API" "$OUT" \
      || fail "$api/$schedule: wrong heading"
    echo "$api API, $schedule schedule: $rows sizes streamed"
  done
done

for bad in --api=sync --schedule=tree; do
  if "$BENCH" "${SWEEP[@]}" "$bad" >"$OUT" 2>&1; then
    fail "$bad was accepted"
  fi
  grep -q "bad flags" "$OUT" || fail "$bad: refused without saying why"
done
echo "bad flags refused"
