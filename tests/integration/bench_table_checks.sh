# shellcheck shell=bash
# Sourced by the benchmarks' tests (ringsync_bench_test.sh, gloo_peer_bench_test.sh,
# mpi_peer_bench_test.sh): what every nccl-tests-style table they check must show.
#
#   check_table FILE WHAT EXPECTED_ROWS   # calls the test's fail "WHAT: why" otherwise
# One row per size (EXPECTED_ROWS), #wrong 0 on every row, and the OK verdict.
check_table() {
  local rows wrong_rows
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 8' "$1" | wc -l)
  wrong_rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 8 && $8 != 0' "$1" | wc -l)
  [[ $rows == "$3" ]] || fail "$2: $rows rows, expected $3"
  [[ $wrong_rows == 0 ]] || fail "$2: $wrong_rows sizes with wrong elements"
  grep -q "^# Out of bounds values : 0 OK$" "$1" || fail "$2: no OK verdict"
}
