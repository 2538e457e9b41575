#!/usr/bin/env bash
# container-engine.sh: a Docker-compatible engine for deploy/docker-compose.yml on a
# Debian bookworm machine without Docker: podman (its Docker API serves docker-compose),
# runc, and a `debian:bookworm` base image made with debootstrap from Debian packages,
# so no image registry is needed. Run as root. Every step is idempotent and says what it
# did (or that there was nothing to do).
#
#   deploy/container-engine.sh setup    # packages, engine config, base image debian:bookworm
#   deploy/container-engine.sh start    # the Docker API service + the health-check ticker
#   eval "$(deploy/container-engine.sh env)"   # DOCKER_HOST for docker-compose
#   deploy/container-engine.sh status   # what runs, by PID; images and compose leftovers
#   deploy/container-engine.sh stop     # stops both processes `start` started, by PID
#   deploy/container-engine.sh prune    # drops earlier builds' layers, keeps the build cache
#   deploy/container-engine.sh build    # builds ringsync:dev through this machine's ccache
#
# What `setup` changes on the machine (nothing else):
#   * apt packages: podman runc debootstrap (with their recommends: netavark, aardvark-dns
#     for service names, catatonit for `init: true`, buildah's storage, iptables).
#   * /etc/containers/containers.conf.d/50-ringsync.conf:
#       runc with the cgroupfs manager (crun refuses hybrid cgroup hierarchies, and there is
#       no systemd to manage cgroups); default ulimits below the machine's hard limits
#       (containers may not raise them); a 1 s DNS timeout in containers (podman's DNS
#       server loses queries while containers start); events to a file (no journald); and podman's
#       default network and address pools in 198.19.0.0/16 (the benchmarking range
#       198.18.0.0/15) instead of its private 10.88.0.0/16 and 10.89.0.0/16.
#   * images localhost/debian:bookworm and docker.io/library/debian:bookworm (one image):
#     `debootstrap --variant=minbase bookworm` from the mirror apt already uses, with the
#     machine's apt sources copied in, so image builds install the same package versions
#     as the machine. The Dockerfiles' `FROM debian:bookworm` finds it without a registry.
#     Images stay in podman's storage (/var/lib/containers) as the build cache.
#   * When containers run, netavark (podman's network backend) turns on net.ipv4.ip_forward
#     and adds its iptables chains (NETAVARK-*); removing a network removes its rules, and
#     the empty base chains stay.
#
# What `start` runs (both stopped by `stop`, by the PIDs it recorded):
#   * `podman system service --time=0 unix://$RUN_DIR/podman.sock`: the Docker API.
#   * a health-check ticker: podman runs HEALTHCHECKs from systemd timers, and without
#     systemd they never run (containers stay "starting" and `depends_on:
#     condition: service_healthy` waits forever). The ticker runs `podman healthcheck run`
#     for each running container with a health check, at that check's own interval.
#
# Settings (environment):
#   RINGSYNC_ENGINE_DIR   socket, PID files and logs of `start`   /run/ringsync-engine
#                         (a second pair of processes can run beside the first with another
#                         directory: the container tests do that)
#   RINGSYNC_DEBIAN_MIRROR  debootstrap's mirror   the first bookworm mirror in apt's sources
set -Eeuo pipefail
# A command that fails under set -e ends the script (-E: also inside functions and $(...));
# say which, instead of ending silently.
trap 'echo "container-engine: line $LINENO: \`$BASH_COMMAND\` failed (exit $?)" >&2' ERR

RUN_DIR="${RINGSYNC_ENGINE_DIR:-/run/ringsync-engine}"
SOCKET="$RUN_DIR/podman.sock"
SERVICE_PID="$RUN_DIR/service.pid"
TICKER_PID="$RUN_DIR/health-ticker.pid"
CONF=/etc/containers/containers.conf.d/50-ringsync.conf
BASE_IMAGE=localhost/debian:bookworm
BASE_ALIAS=docker.io/library/debian:bookworm
PACKAGES=(podman runc debootstrap)
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)   # the checkout: the build context

say() { echo "container-engine: $*"; }
die() { echo "container-engine: $*" >&2; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "'$1' needs root (packages, /etc/containers, podman's storage); run it as root"; }

# ------------------------------------------------------------------------------ setup
install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "packages: ${PACKAGES[*]} already installed (podman $(podman --version | awk '{print $3}'))"
    return
  fi
  say "packages: installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q "${missing[@]}" >/dev/null
  say "packages: installed ${missing[*]} (podman $(podman --version | awk '{print $3}'))"
}

write_config() {
  local want
  want=$(cat <<'EOF'
# Written by ringsync's deploy/container-engine.sh (setup); removing it undoes the setup.
[containers]
# Containers cannot raise RLIMIT_NOFILE/NPROC above the machine's hard limits.
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
# Podman's DNS server (aardvark-dns 1.4) drops queries while it reloads, which it does
# each time a container starts: glibc's default 5 s timeout (x2 attempts, x2 servers)
# turned one lost answer into a peer name that resolved tens of seconds late. Ask again
# after a second, more times.
dns_options = ["timeout:1", "attempts:5"]

[engine]
# crun refuses hybrid cgroup hierarchies; no systemd: cgroupfs, events to a file.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
# Never a private range: the default network and every network created without a subnet
# come from 198.19.0.0/16 (the benchmarking range 198.18.0.0/15).
default_subnet = "198.19.255.0/24"
default_subnet_pools = [{"base" = "198.19.128.0/17", "size" = 24}]
EOF
  )
  if [[ -f "$CONF" && "$(cat "$CONF")" == "$want" ]]; then
    say "config: $CONF unchanged"
    return
  fi
  mkdir -p "$(dirname "$CONF")"
  printf '%s\n' "$want" >"$CONF"
  say "config: wrote $CONF (runc + cgroupfs, ulimits, DNS timeout, networks in 198.19.0.0/16)"
}

debian_mirror() {
  [[ -n "${RINGSYNC_DEBIAN_MIRROR:-}" ]] && { echo "$RINGSYNC_DEBIAN_MIRROR"; return; }
  # deb822 sources (URIs:) or one-line sources (deb URI SUITE ...), the first for bookworm.
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ && u {print u; exit}')
  [[ -n "$uri" ]] || uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}')
  echo "${uri:-http://deb.debian.org/debian}"
}

build_base_image() {
  if podman image exists "$BASE_IMAGE"; then
    podman image exists "$BASE_ALIAS" || podman tag "$BASE_IMAGE" "$BASE_ALIAS"
    say "base image: $BASE_IMAGE present ($(podman image inspect --format '{{.Id}}' "$BASE_IMAGE" | cut -c1-12), built $(podman image inspect --format '{{.Created}}' "$BASE_IMAGE" | cut -d. -f1))"
    return
  fi
  local mirror rootfs started
  mirror=$(debian_mirror)
  rootfs=$(mktemp -d /var/tmp/ringsync-debootstrap.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  started=$SECONDS
  say "base image: debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
    { tail -n 20 "$rootfs.log" >&2; rm -f "$rootfs.log"; die "debootstrap failed (log above)"; }
  rm -f "$rootfs.log"
  # The machine's apt sources (bookworm, -updates, -security), so that image builds get the
  # package versions this machine's builds and tests use; no package lists in the image.
  if grep -qs bookworm /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; then
    rm -f "$rootfs/etc/apt/sources.list"
    cp -a /etc/apt/sources.list.d/. "$rootfs/etc/apt/sources.list.d/"
    [[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$rootfs/etc/apt/sources.list"
  fi
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | podman import -q --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  podman tag "$BASE_IMAGE" "$BASE_ALIAS"
  rm -rf "$rootfs"
  trap - EXIT
  say "base image: imported $BASE_IMAGE (also tagged $BASE_ALIAS), $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'), in $((SECONDS - started)) s"
}

cmd_setup() {
  need_root setup
  install_packages
  write_config
  build_base_image
  say "setup done; next: deploy/container-engine.sh start"
}

# ------------------------------------------------------------------------------ start/stop
# alive PIDFILE PATTERN: the PID in PIDFILE if that process runs and its command line
# contains PATTERN (a recycled PID is not ours).
alive() {
  local pid
  [[ -f "$1" ]] || return 1
  pid=$(cat "$1")
  [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$2" || return 1
  echo "$pid"
}

api_ready() { curl -sf --max-time 2 --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; }

cmd_start() {
  need_root start
  command -v podman >/dev/null || die "podman is not installed; run: deploy/container-engine.sh setup"
  mkdir -p "$RUN_DIR"
  local pid
  if pid=$(alive "$SERVICE_PID" "unix://$SOCKET"); then
    say "API service: already running (pid $pid) on unix://$SOCKET"
  else
    rm -f "$SOCKET"
    setsid podman system service --time=0 "unix://$SOCKET" >>"$RUN_DIR/service.log" 2>&1 </dev/null &
    echo $! >"$SERVICE_PID"
    local i
    for ((i = 0; i < 100; i++)); do api_ready && break; sleep 0.1; done
    api_ready || { cmd_stop >/dev/null; die "the API service did not answer on $SOCKET ($RUN_DIR/service.log)"; }
    say "API service: started (pid $(cat "$SERVICE_PID")) on unix://$SOCKET"
  fi
  if pid=$(alive "$TICKER_PID" "health-ticker $RUN_DIR"); then
    say "health-check ticker: already running (pid $pid)"
  else
    setsid "$(readlink -f "$0")" health-ticker "$RUN_DIR" >>"$RUN_DIR/health-ticker.log" 2>&1 </dev/null &
    echo $! >"$TICKER_PID"
    say "health-check ticker: started (pid $(cat "$TICKER_PID"))"
  fi
  say "use it: export DOCKER_HOST=unix://$SOCKET   (or: eval \"\$($0 env)\")"
}

# stop_pid PIDFILE PATTERN NAME: SIGTERM, 10 s grace, SIGKILL; only our own process.
stop_pid() {
  local pid i
  if ! pid=$(alive "$1" "$2"); then
    rm -f "$1"
    say "$3: not running"
    return
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
  say "$3: stopped (pid $pid)"
}

cmd_stop() {
  stop_pid "$TICKER_PID" "health-ticker $RUN_DIR" "health-check ticker"
  stop_pid "$SERVICE_PID" "unix://$SOCKET" "API service"
  rm -f "$SOCKET"
}

cmd_env() { echo "export DOCKER_HOST=unix://$SOCKET"; }

cmd_status() {
  local pid
  if pid=$(alive "$SERVICE_PID" "unix://$SOCKET"); then
    say "API service: running (pid $pid) on unix://$SOCKET$(api_ready && echo ', answering' || echo ', NOT answering')"
  else
    say "API service: not running (deploy/container-engine.sh start)"
  fi
  if pid=$(alive "$TICKER_PID" "health-ticker $RUN_DIR"); then
    say "health-check ticker: running (pid $pid)"
  else
    say "health-check ticker: not running"
  fi
  command -v podman >/dev/null || { say "podman: not installed (deploy/container-engine.sh setup)"; return; }
  say "images:"
  podman images --format '  {{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}  {{.Created}}' | sort -u
  say "containers: $(podman ps -a -q | wc -l), networks besides podman's default: $(podman network ls -q | awk '$0 != "podman"' | wc -l), volumes: $(podman volume ls -q | wc -l)"
}

# podman building the root Dockerfile with `$@` as deploy/docker-compose.yml builds it (the
# Docker image format, no pulls, the host's network): the same settings, so that the
# layers of one build are the cache of the next, whichever of the two made them.
podman_build() {
  podman build --format docker --pull=never --network=host "$@" "$ROOT"
}

# ------------------------------------------------------------------------------ prune
# Image builds leave the layers of every earlier build behind (unnamed images: the build
# stage of each source change, about 1 GB). Keeps the base image, the named images and the
# Dockerfile's dependency stage, which `--target deps` names localhost/ringsync-deps:cache
# (a cached build: seconds), and removes every unnamed image, so the next build still
# reuses the dependency layer and the storage stays bounded.
# Right after a build podman is still deleting that build's containers and layers: du
# then meets files that vanish under it and exits 1 (with set -e and pipefail that ended
# the prune, silently, after every 17-minute build). Its total is still right.
storage_mb() {
  { du -sm /var/lib/containers/storage 2>/dev/null || true; } | cut -f1
}

cmd_prune() {
  need_root prune
  local before after
  before=$(storage_mb)
  # Retried: right after a build, podman may still hold that build's storage lock or last
  # container (a prune after a 17-minute build once failed here and passed when run again).
  local attempt out=""
  for attempt in 1 2 3; do
    if out=$(podman_build -q --target deps -t localhost/ringsync-deps:cache 2>&1); then
      break
    fi
    [[ $attempt == 3 ]] &&
      die "prune: could not name the dependency stage (podman build --target deps $ROOT): ${out##*$'\n'}"
    say "prune: naming the dependency stage failed (${out##*$'\n'}); again in 5 s"
    sleep 5
  done
  # Best effort: an image podman is still releasing (a build's last container) makes the
  # prune fail now and succeed next time; the space is reclaimed then.
  local pruned
  if ! pruned=$(podman image prune -f 2>&1); then
    say "prune: podman image prune did not finish (left for the next prune): ${pruned##*$'\n'}"
  fi
  after=$(storage_mb)
  say "prune: kept $(podman images -q | sort -u | wc -l) named images (the dependency stage as localhost/ringsync-deps:cache); storage ${before} MB -> ${after} MB"
}

# The image `docker-compose build` makes, built by podman itself so that the compile can
# mount this machine's ccache directory (the Docker API, and so docker-compose 1.29, has no
# build-time mounts): after any change to the sources the build stage compiles everything
# again, ~7.5 minutes on 2 cores without the cache and ~35 s with it. The layers it leaves
# are the ones a `docker-compose build` right after finds cached (podman_build). Without
# ccache it builds as that does.
cmd_build() {
  need_root build
  local cache="" image="${RINGSYNC_IMAGE:-ringsync:dev}" mount=()
  if command -v ccache >/dev/null; then
    cache=$(ccache --get-config cache_dir)
    mkdir -p "$cache"
    mount=(--volume "$cache:/root/.cache/ccache")
  fi
  say "build: $image from $ROOT${cache:+, compiling through ccache in $cache}"
  podman_build "${mount[@]}" -t "$image"
}

# ------------------------------------------------------------------------------ health ticker
# Runs each running container's health check at its configured interval (default 30 s,
# as Docker's). Stops when its parent `start` asks it (SIGTERM) — it holds no state.
cmd_health_ticker() {
  trap 'exit 0' TERM INT
  set +e   # a failed podman call must not end the ticker
  trap - ERR   # nor be reported: the next tick tries again
  declare -A next_run interval
  local now id iv
  while true; do
    now=$(date +%s%N)
    for id in $(podman ps -q --no-trunc --filter status=running 2>/dev/null); do
      if [[ -z "${interval[$id]:-}" ]]; then
        # Nanoseconds; empty: no health check; 0: Docker's default interval.
        iv=$(podman inspect --format '{{if .Config.Healthcheck}}{{if .Config.Healthcheck.Test}}{{.Config.Healthcheck.Interval.Nanoseconds}}{{end}}{{end}}' "$id" 2>/dev/null || true)
        case "$iv" in
          "") interval[$id]=none ;;
          0) interval[$id]=30000000000 ;;
          *) interval[$id]=$iv ;;
        esac
      fi
      [[ "${interval[$id]}" == none ]] && continue
      (( now >= ${next_run[$id]:-0} )) || continue
      next_run[$id]=$((now + interval[$id]))
      podman healthcheck run "$id" >/dev/null 2>&1 || true
    done
    sleep 1
  done
}

case "${1:-}" in
  setup) cmd_setup ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  prune) cmd_prune ;;
  build) cmd_build ;;
  env) cmd_env ;;
  health-ticker) RUN_DIR="$2"; cmd_health_ticker ;;
  *) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
