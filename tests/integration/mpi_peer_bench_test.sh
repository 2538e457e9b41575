#!/usr/bin/env bash
# mpi-peer-bench (the OpenMPI peer of bench/compare_with_gloo.sh) checks what it measures:
# at N=2 over both transports the compare script uses (TCP on lo, shared memory), every
# size's result of each collective it times (MPI_Allreduce, MPI_Bcast, MPI_Allgather,
# MPI_Scatter, MPI_Gather, MPI_Alltoall, MPI_Alltoallv, MPI_Reduce_scatter_block) is exact (#wrong 0 on
# every row, one row per size), the run exits 0, and mpirun leaves no rank behind. Bad
# sweep flags are refused (exit non-zero).
#
#   tests/integration/mpi_peer_bench_test.sh BUILD/bin/mpi-peer-bench [MPIRUN]
set -euo pipefail
BENCH=$1
MPIRUN=(timeout 60 "${2:-mpirun}" --allow-run-as-root --oversubscribe -np 2 --bind-to none
        --mca oob_tcp_if_include lo --mca pml ob1)
SWEEP=(--min_bytes=4 --max_bytes=1M --step_factor=8 --iters=2 --warmup_iters=1)
EXPECTED_ROWS=7  # 4 B, 32 B, 256 B, 2 KiB, 16 KiB, 128 KiB, 1 MiB (all but the all-reduce's
                 # and broadcast's rounded to 2 blocks: 4 B becomes 2 elements)
OUT=$(mktemp /tmp/mpi-peer-bench-test-XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$OUT" >&2; exit 1; }
source "$(dirname "$0")/bench_table_checks.sh"

for transport in "tcp,self --mca btl_tcp_if_include lo" "vader,self"; do
  for collective in allreduce broadcast allgather scatter gather alltoall reducescatter alltoallv; do
    what="btl $transport, $collective"
    # shellcheck disable=SC2086
    "${MPIRUN[@]}" --mca btl $transport "$BENCH" --collective="$collective" "${SWEEP[@]}" \
      >"$OUT" 2>&1 || fail "$what: mpirun exited $?"
    check_table "$OUT" "$what" "$EXPECTED_ROWS"
    if pgrep -f "^$BENCH( |$)" >/dev/null; then fail "$what: a rank outlived mpirun"; fi
    echo "$what: $EXPECTED_ROWS sizes, all exact"
  done
done

if "${MPIRUN[@]}" --mca btl self,vader "$BENCH" --step_factor=1 >"$OUT" 2>&1; then
  fail "--step_factor=1 was accepted"
fi
echo "bad sweep flags refused"
