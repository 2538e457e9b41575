#!/usr/bin/env bash
# Runs GoogleTest binaries JOBS at a time, each with its output in a log of its own, then
# prints the log of every run that failed and exits 1 if any did.
#
#   tools/sanitizers/run_gtests.sh JOBS LOG_DIR BIN_DIR TEST[:SHARDS]...
#
# TEST:K runs the binary as K shards (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX), so that one
# long binary does not set the pace alone. Runs start in the order given: name the
# longest first. Why not ctest: a sanitizer build of a few binaries has no use for
# ctest's per-test processes, which would start each binary once per test.
set -uo pipefail

(($# >= 4)) || { echo "usage: $0 JOBS LOG_DIR BIN_DIR TEST[:SHARDS]..." >&2; exit 2; }
jobs=$1 logs=$2 bin=$3
shift 3
rm -rf "$logs" && mkdir -p "$logs"

runs=()
for spec in "$@"; do
  test=${spec%%:*}
  shards=1
  [[ $spec == *:* ]] && shards=${spec#*:}
  [[ -x $bin/$test ]] || { echo "run_gtests: no $bin/$test" >&2; exit 2; }
  [[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "run_gtests: '$spec': shards must be a count" >&2; exit 2; }
  for ((i = 0; i < shards; ++i)); do runs+=("$test $i $shards"); done
done

# One run (TEST INDEX SHARDS): its log, then a status file saying how it ended.
run_one() {
  local test=$1 index=$2 shards=$3
  local name="$test.$index-of-$shards" start=$SECONDS
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$index "$RUN_GTESTS_BIN/$test" --gtest_brief=1 \
    >"$RUN_GTESTS_LOGS/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$RUN_GTESTS_LOGS/$name.status"
  echo "run_gtests: $name exit $rc in $((SECONDS - start)) s"
}
export -f run_one
export RUN_GTESTS_BIN=$bin RUN_GTESTS_LOGS=$logs

printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _

failed=0
for run in "${runs[@]}"; do
  read -r test index shards <<<"$run"
  name="$test.$index-of-$shards"
  if [[ $(cat "$logs/$name.status" 2>/dev/null) != 0 ]]; then
    echo "===== $name failed; its output:"
    cat "$logs/$name.log"
    failed=$((failed + 1))
  fi
done
echo "run_gtests: $((${#runs[@]} - failed)) runs passed, $failed failed"
((failed == 0))
