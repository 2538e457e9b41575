#!/usr/bin/env bash
# Installs every Debian package ringsync needs to build, test and run its demo.
# Idempotent: packages already present are skipped, so a warm machine pays nothing.
# Used by the Makefile, .ci/run and the Dockerfile's build stage.
#
#   deploy/install-deps.sh            # build + test + benchmark-peer dependencies
#   deploy/install-deps.sh --runtime  # only what the daemon needs at run time
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev
  # libcrypto (OpenSSL): sealed data connections under mutual TLS (AES-256-GCM).
  libssl-dev
  # make fuzz: clang with its libFuzzer, ASan and UBSan runtimes (libclang-rt-14-dev).
  clang libclang-rt-14-dev
  # prometheus-cpp: the daemons' metrics (we link only its core library; the package
  # also brings its pull/push libraries and their civetweb and curl headers).
  prometheus-cpp-dev
  # Cluster tests and peers we benchmark against.
  # (ringsync-netns: iproute2 for namespaces and tc, nftables for loss, python3-yaml.)
  iproute2 nftables procps python3 python3-yaml python3-numpy python3-torch
  # mpi-peer-bench (bench/): OpenMPI's MPI_Allreduce under mpirun, TCP and shared memory.
  openmpi-bin libopenmpi-dev
  # gloo-peer-bench (bench/): the Gloo C++ library ringsync is measured against.
  libgloo-dev
  prometheus docker-compose curl
  # The Python package and its torch.distributed backend (client/python): pybind11, the
  # c10d headers (libtorch-dev), and for its tests and example pytest and scikit-learn
  # (the bundled digits data set). About 120 MB more in the Dockerfile's build stage.
  python3-dev pybind11-dev python3-pybind11 libtorch-dev python3-sklearn python3-pytest
)
runtime_packages=(
  # Every library ringsyncd, ringsyncctl and ringsync-train-example link directly
  # (ldd + dpkg -S); libgrpc29, libre2-9, libc-ares2 come in as libgrpc++1.51's
  # dependencies. libcpp-httplib0.11: the HTTP endpoint (--http_listen, /metrics);
  # libprometheus-cpp-core1.0: the metrics it serves; libssl3: libcrypto, which seals
  # data connections.
  libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 libcpp-httplib0.11
  libprometheus-cpp-core1.0 libssl3
  ca-certificates
)

packages=("${build_packages[@]}")
[[ "${1:-}" == "--runtime" ]] && packages=("${runtime_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or with sudo) to install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
