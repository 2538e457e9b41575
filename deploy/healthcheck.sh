#!/usr/bin/env bash
# ringsync-healthcheck: the container HEALTHCHECK of the ringsync image.
#
# Finds the ringsyncd process in this container, reads its role and flags from
# /proc/PID/cmdline, and checks that it serves what it should:
#   coordinator  a TCP connection to its --listen port succeeds (default 127.0.0.1:7400;
#                a wildcard host such as 0.0.0.0 is probed on 127.0.0.1)
#   worker       its SDK unix socket exists (--socket, default
#                /tmp/ringsync-UID/WORKER_ID.sock as the daemon derives it) and, when
#                --client_listen is set, a TCP connection to that port succeeds
# Exit 0 = healthy, 1 = unhealthy (Docker's contract); one line on stdout says why, and
# `docker inspect --format '{{json .State.Health}}' CONTAINER` shows it.
#
# When `ringsyncctl` is installed beside this script (the Dockerfile copies it once the
# target exists), each check is a real grpc.health.v1.Health/Check instead:
#   ringsyncctl health 127.0.0.1:PORT   /   ringsyncctl health unix:SOCKET
# Until then (Debian ships no grpc_health_probe, and the image carries no interpreter for
# a gRPC client) the checks above stand in: port accepts / socket exists.
# RINGSYNC_HEALTHCHECK_PROBE=basic forces the stand-in checks.
#
#   ringsync-healthcheck                 # auto: the one ringsyncd process in the container
#   RINGSYNC_HEALTHCHECK_PID=123 ringsync-healthcheck   # check a given process (tests)
set -uo pipefail

fail() { echo "unhealthy: $*"; exit 1; }

# The ringsyncd process: PID 1 without --init, a child of docker-init with it.
find_daemon() {
  local dir exe
  for dir in /proc/[0-9]*; do
    exe=$(tr '\0' '\n' <"$dir/cmdline" 2>/dev/null | head -n 1) || continue
    [[ "${exe##*/}" == ringsyncd ]] && { echo "${dir#/proc/}"; return 0; }
  done
  return 1
}

pid="${RINGSYNC_HEALTHCHECK_PID:-}"
if [[ -z "$pid" ]]; then
  pid=$(find_daemon) || fail "no ringsyncd process in this container"
fi
[[ -r "/proc/$pid/cmdline" ]] || fail "ringsyncd (pid $pid) is not running"
mapfile -d '' -t argv <"/proc/$pid/cmdline"
role="${argv[1]:-}"

# flag NAME DEFAULT: the value of --NAME=V or --NAME V (absl accepts both), else DEFAULT.
flag() {
  local name="$1" value="$2" i
  for ((i = 2; i < ${#argv[@]}; i++)); do
    case "${argv[i]}" in
      --"$name"=* | -"$name"=*) value="${argv[i]#*=}" ;;
      --"$name" | -"$name") value="${argv[i + 1]:-}" ;;
    esac
  done
  echo "$value"
}

# ringsyncctl: beside this script or on PATH, unless the basic checks are forced.
ctl=""
if [[ "${RINGSYNC_HEALTHCHECK_PROBE:-auto}" != basic ]]; then
  if [[ -x "$(dirname "$0")/ringsyncctl" ]]; then
    ctl="$(dirname "$0")/ringsyncctl"
  else
    ctl=$(command -v ringsyncctl || true)
  fi
fi

# The daemon's own credentials, presented to its TCP ports as ringsyncctl's (a daemon's
# certificate is also a client certificate; see deploy/make-certs.sh).
auth=()
for name in tls_ca tls_cert tls_key token_file; do
  value=$(flag "$name" "")
  [[ -z "$value" ]] || auth+=("--$name=$value")
done

# grpc_health TARGET — Health/Check via ringsyncctl (its one-line reason on failure).
grpc_health() {
  local why
  why=$("$ctl" health "$1" --timeout=3s "${auth[@]}" 2>&1) ||
    fail "$role (pid $pid): ${why:-$1 not serving}"
}

# tcp_probe HOST:PORT — connect and close; a wildcard or empty host means this container.
tcp_probe() {
  local target="$1" host port
  host="${target%:*}" port="${target##*:}"
  host="${host#[}" host="${host%]}"
  case "$host" in "" | 0.0.0.0 | :: | "*") host=127.0.0.1 ;; esac
  [[ "$port" =~ ^[0-9]+$ && "$port" != 0 ]] || fail "cannot probe '$target' (port 0 or no port)"
  if [[ -n "$ctl" ]]; then
    grpc_health "$host:$port"
    return
  fi
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$host" "$port" 2>/dev/null ||
    fail "$role (pid $pid): nothing accepts connections on $host:$port"
}

case "$role" in
  coordinator)
    listen=$(flag listen 127.0.0.1:7400)
    tcp_probe "$listen"
    echo "healthy: coordinator (pid $pid) ${ctl:+SERVING, }accepts connections on $listen"
    ;;
  worker)
    socket=$(flag socket "")
    if [[ -z "$socket" ]]; then
      worker_id=$(flag worker_id "")
      # --fromenv=worker_id / --tryfromenv: absl reads it from FLAGS_worker_id.
      [[ -n "$worker_id" ]] ||
        worker_id=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^FLAGS_worker_id=//p')
      [[ -n "$worker_id" ]] || worker_id="$(cat /proc/sys/kernel/hostname)-$pid"
      # DefaultSocketPath (daemon/worker/socket_path.h): the daemon's real uid's directory.
      uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
      socket="/tmp/ringsync-${uid:-$(id -u)}/$worker_id.sock"
    fi
    [[ -S "$socket" ]] || fail "worker (pid $pid): no unix socket at $socket (yet)"
    [[ -z "$ctl" ]] || grpc_health "unix:$socket"
    client_listen=$(flag client_listen "")
    [[ -z "$client_listen" ]] || tcp_probe "$client_listen"
    echo "healthy: worker (pid $pid) ${ctl:+SERVING, }serves unix:$socket${client_listen:+ and $client_listen}"
    ;;
  *)
    fail "ringsyncd (pid $pid) has an unknown role '$role'"
    ;;
esac
