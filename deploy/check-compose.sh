#!/usr/bin/env bash
# Checks the deployment files without a Docker engine (CI has none); .ci/run calls it.
#   deploy/docker-compose.yml  parses and validates with docker-compose (Debian: 1.29)
#   deploy/prometheus.yml      valid for promtool, when promtool is installed
#   deploy/docker-compose.local.yml  the same, with this override (engines without a registry)
#   deploy/healthcheck.sh, deploy/container-engine.sh  bash syntax
#   deploy/compose-secrets.sh, deploy/make-certs.sh    sh syntax
# No secrets needed: deploy/compose-secrets.sh's directory may be absent.
# Both tools come with deploy/install-deps.sh. Exit 0 and a last line "check-compose: OK"
# when all pass.
set -euo pipefail
cd "$(dirname "$0")/.."

compose_file=deploy/docker-compose.yml
if ! command -v docker-compose >/dev/null; then
  echo "check-compose: docker-compose not found; run deploy/install-deps.sh (as root)" >&2
  exit 1
fi

# config -q prints nothing when the file is valid; interpolation uses the defaults in
# the file unless the caller's environment sets RINGSYNC_* variables. The monitoring
# profile is enabled so the Prometheus service is validated too.
if ! docker-compose -f "$compose_file" --profile monitoring config -q; then
  echo "check-compose: FAILED: $compose_file does not validate (docker-compose $(docker-compose version --short))" >&2
  exit 1
fi
services=$(docker-compose -f "$compose_file" --profile monitoring config --services | tr '\n' ' ')
# With the override for engines without a registry (deploy/container-engine.sh's podman).
local_file=deploy/docker-compose.local.yml
if ! docker-compose -f "$compose_file" -f "$local_file" --profile monitoring config -q; then
  echo "check-compose: FAILED: $compose_file + $local_file do not validate" >&2
  exit 1
fi

if command -v promtool >/dev/null; then
  # promtool insists that credentials_file exists. The file names the token's path in the
  # container, which no machine without deploy/compose-secrets.sh's output has: check a
  # copy that names a stand-in token instead (same directives otherwise).
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  echo stand-in >"$scratch/http-token"
  sed "s|/etc/prometheus/secrets/http-token|$scratch/http-token|g" deploy/prometheus.yml \
    >"$scratch/prometheus.yml"
  promtool check config "$scratch/prometheus.yml" >/dev/null ||
    { echo "check-compose: FAILED: deploy/prometheus.yml (see promtool output above)" >&2; exit 1; }
else
  echo "check-compose: promtool not found; deploy/prometheus.yml not checked"
fi

bash -n deploy/healthcheck.sh
bash -n deploy/container-engine.sh
sh -n deploy/compose-secrets.sh deploy/make-certs.sh

echo "check-compose: OK: $compose_file (+ $local_file) valid for docker-compose $(docker-compose version --short) (services: ${services% })"
