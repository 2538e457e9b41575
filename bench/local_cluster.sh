# shellcheck shell=bash
# Sourced by the benchmark scripts in bench/: a local ringsync cluster for one script run,
# and the cleanup that stops only what the script started.
#
#   source bench/local_cluster.sh
#   WORK=$(mktemp -d ...); BIN=build/bin; NRANKS=4
#   start_local_cluster "--log_level=debug"   # worker flags, comma-separated (may be "")
#   (CLUSTER_FLAGS in the environment: ringsync-local-cluster's own, e.g. --security=tls;
#   CLUSTER_LAUNCHER: a command the cluster runs under, e.g. "unshare --pid --fork
#   --kill-child=SIGTERM" (root): its workers then cannot see the benchmark's processes,
#   as a worker in a container of its own cannot see its trainer; WORKER_PIDS is then
#   empty, the pids file holding the namespace's own pids)
#   ... "${TARGETS[@]}" (SDK targets, rank order), "${WORKER_PIDS[@]}", BENCH_PIDS+=(pid)
# The EXIT trap kills the BENCH_PIDS still running (removing their SDK shared-memory
# files, named after their PID: client/src/shared_memory_region.h), stops the cluster
# (the launcher stops its own children) and removes $WORK.

LAUNCHER=""
BENCH_PIDS=()
cleanup_local_cluster() {
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; rm -f /dev/shm/ringsync-"$p"-*; done
  if [[ -n $LAUNCHER ]]; then stop_local_cluster 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup_local_cluster EXIT
trap 'exit 130' INT TERM

start_local_cluster() {  # $1: worker flags, comma-separated
  # shellcheck disable=SC2086  # CLUSTER_LAUNCHER, CLUSTER_FLAGS: words split on spaces
  ${CLUSTER_LAUNCHER:-} "$BIN/ringsync-local-cluster" --world_size="$NRANKS" --targets_file="$WORK/targets" \
    --pids_file="$WORK/pids" ${1:+--worker_flags="$1"} ${CLUSTER_FLAGS:-} >"$WORK/cluster.log" 2>&1 &
  LAUNCHER=$!
  for _ in $(seq 300); do
    [[ -s $WORK/targets ]] && break
    kill -0 "$LAUNCHER" 2>/dev/null || { cat "$WORK/cluster.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -s $WORK/targets ]] || { echo "cluster did not start in 30 s" >&2; exit 1; }
  mapfile -t TARGETS <"$WORK/targets"
  WORKER_PIDS=()
  [[ -n ${CLUSTER_LAUNCHER:-} ]] || mapfile -t WORKER_PIDS <"$WORK/pids"
}

stop_local_cluster() {
  # Under CLUSTER_LAUNCHER the cluster is the launcher's child (unshare --fork ignores
  # SIGTERM while it waits for it): stop that child, and the launcher follows.
  if [[ -n ${CLUSTER_LAUNCHER:-} ]]; then pkill -TERM -P "$LAUNCHER" || true; fi
  kill -TERM "$LAUNCHER" || true; wait "$LAUNCHER" || true; LAUNCHER=""
}
