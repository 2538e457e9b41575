#!/bin/sh
# compose-secrets.sh: the credentials deploy/docker-compose.yml mounts into its daemons and
# Prometheus. The first command before `up`; run as root (see "Ownership").
#
#   sudo deploy/compose-secrets.sh [DIR]
#
# DIR: the argument, else $RINGSYNC_SECRETS_DIR (relative to deploy/, as docker-compose
# reads it), else deploy/secrets (git ignores it; .dockerignore keeps it out of images).
# The compose file reads the same RINGSYNC_SECRETS_DIR, so set it for both or for neither.
#
# What it writes (the daemons: mutual TLS on the coordinator's and the peers' ports, a
# bearer token on every HTTP port; the trainers use their worker's unix socket and need
# nothing):
#   DIR/ca/            deploy/make-certs.sh's directory: the CA (ca.key signs and is mounted
#                      nowhere), every certificate, and client-ops.pem/.key for ringsyncctl
#                      on this host (coordinator published on 127.0.0.1)
#   DIR/http-token     the HTTP bearer token (32 random bytes, base64)
#   DIR/coordinator/, DIR/w0/ .. DIR/w3/
#                      what that daemon's container sees at /run/secrets/ringsync: ca.pem,
#                      tls.pem and tls.key (its own certificate: URI SAN
#                      ringsync://coordinator/coordinator or ringsync://worker/wN, DNS:NAME
#                      for the name peers dial on the compose network) and http-token
#   DIR/prometheus/    http-token only, at /etc/prometheus/secrets (deploy/prometheus.yml)
#
# Ownership. Keys and tokens are 0600 and the containers do not run as root: the daemons
# as uid 10001 (the image's `ringsync` user), Prometheus as 65534 (`nobody`, upstream's
# image and deploy/prometheus-image alike). So each service's directory and files belong
# to the uid that reads them (chown), which takes root. Rejected: group-readable files
# (chgrp to a group one is not in takes root as well, and Prometheus has another uid) and
# world-readable keys (every local user could read them). DIR itself stays 0700 root: the
# engine mounts a service's directory as root, and no one else on the host needs it.
#
# Running it again keeps the CA and the token, renews every certificate (the daemons load
# the new files within --tls_reload_interval, 10 s) and restores ownership. Environment:
#   RINGSYNC_COMPOSE_WORKERS  the workers' service names (default "w0 w1 w2 w3"); add one
#                             when growing the ring
#   RINGSYNC_CERT_HOSTS       more names/addresses in every certificate (make-certs.sh)
set -eu

deploy=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 1 ]; then
  echo "usage: $0 [DIR]   (default: \$RINGSYNC_SECRETS_DIR, else deploy/secrets)" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  dir=$1
else
  dir=${RINGSYNC_SECRETS_DIR:-./secrets}
  case $dir in /*) ;; *) dir=$deploy/$dir ;; esac
fi
workers=${RINGSYNC_COMPOSE_WORKERS:-w0 w1 w2 w3}
daemon_uid=10001
prometheus_uid=65534

if [ "$(id -u)" != 0 ]; then
  echo "$0: run as root (sudo $0): the keys must belong to uid $daemon_uid, the image's" \
    "ringsync user, and the token to $prometheus_uid for Prometheus (see the script's header)" >&2
  exit 1
fi

umask 077
mkdir -p "$dir"
chmod 0700 "$dir"

names=coordinator
for w in $workers; do names="$names worker/$w"; done
# shellcheck disable=SC2086  # one argument per name
"$deploy/make-certs.sh" "$dir/ca" $names client/ops

if [ ! -s "$dir/http-token" ]; then
  head -c 32 /dev/urandom | base64 >"$dir/http-token.new"
  mv "$dir/http-token.new" "$dir/http-token"
  echo "made $dir/http-token"
fi

# place SERVICE UID [CERT]: DIR/SERVICE with the token (and CERT's certificate and key),
# all of it owned by UID.
place() {
  d=$dir/$1
  mkdir -p "$d"
  cp "$dir/http-token" "$d/http-token"
  if [ $# -eq 3 ]; then
    cp "$dir/ca/ca.pem" "$d/ca.pem"
    # Key first: a daemon reloading between the two copies keeps its old pair (see
    # make-certs.sh).
    cp "$dir/ca/$3.key" "$d/tls.key"
    cp "$dir/ca/$3.pem" "$d/tls.pem"
  fi
  chmod 0700 "$d"
  chmod 0600 "$d"/*
  chown -R "$2:$2" "$d"
  echo "placed $d (owner uid $2)"
}

place coordinator "$daemon_uid" coordinator
for w in $workers; do place "$w" "$daemon_uid" "worker-$w"; done
place prometheus "$prometheus_uid"
echo "compose-secrets: OK: $dir"
