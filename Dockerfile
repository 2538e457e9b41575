# ringsync image: ringsyncd (coordinator and worker roles) and the example trainer.
#
#   docker build -t ringsync:dev .
#   docker run --rm ringsync:dev --help
#   docker run --rm -p 127.0.0.1:7400:7400 ringsync:dev coordinator --listen=0.0.0.0:7400 --world_size=4
#   docker-compose -f deploy/docker-compose.yml up     # a whole cluster (deploy/README.md)
# Without Docker: deploy/container-engine.sh sets up podman, whose Docker API builds this
# file as it is (Docker's image format, so the HEALTHCHECK is kept; deploy/README.md).
#
# Stages on the same Debian release as the developers' machines and CI, so the image
# links against exactly the libraries the tests ran with:
#   deps     the project's own install script (what CI installs)
#   build    the project's CMake build (what CI does)
#   runtime  only the shared libraries the binaries need, a non-root user, health check
# CUDA: debian:bookworm has no nvcc, so CMake's check_language(CUDA) finds none and the
# build falls back to the CPU reducer on its own (--reduce_device=auto picks the CPU).

############################################################################# deps stage
# The build cache is this stage: it depends only on the install script, so editing sources
# reuses it (and the runtime stage's package layer) and recompiles only the programs. A
# stage of its own so that it can be kept by name (`--target deps`; deploy/container-engine.sh
# prune does) while older builds are removed. No ccache cache mount: RUN --mount needs
# BuildKit, which docker-compose 1.29 and Debian's Docker do not use by default (podman's
# --volume does it instead: deploy/container-engine.sh build). (It installs the whole
# developer set, benchmark peers included: it never ships.)
FROM debian:bookworm AS deps
COPY deploy/install-deps.sh /src/deploy/install-deps.sh
RUN bash /src/deploy/install-deps.sh && rm -rf /var/lib/apt/lists/*

############################################################################ build stage
FROM deps AS build
WORKDIR /src
COPY . .

# The Makefile's configure and build commands (`make build` minus its deps step, done
# above). Only the shipped programs are built; pass
# --build-arg RINGSYNC_TARGETS=all to compile everything CI compiles, tests included.
# ringsyncctl is listed ahead of time: a target that does not exist yet is skipped.
ARG BUILD_TYPE=RelWithDebInfo
ARG CMAKE_FLAGS=""
ARG RINGSYNC_TARGETS="ringsyncd ringsync-train-example ringsyncctl ringsync-bench"
# CMake compiles through ccache (installed with the deps): empty here, but a build that
# mounts a cache at /root/.cache/ccache (`podman build --volume`; deploy/README.md) reuses
# it, with paths taken relative to /src as the Makefile takes them to the checkout.
ENV CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE}" ${CMAKE_FLAGS} \
 && known=$(cmake --build build --target help | sed -n 's/^\([^:]*\): .*/\1/p') \
 && targets="" \
 && for t in ${RINGSYNC_TARGETS}; do \
      if [ "$t" = all ] || printf '%s\n' $known | grep -qx "$t"; then targets="$targets $t"; \
      else echo "image: target '$t' does not exist (yet); skipped"; fi; \
    done \
 && cmake --build build -j "$(nproc)" --target ${targets}

# Install: the programs that exist (ringsync-bench: the all-reduce benchmark, to measure a
# deployed ring from a trainer's container), debug sections stripped (symbols kept, so a crash
# backtrace still names functions); the health check beside them.
RUN mkdir -p /opt/ringsync/bin \
 && for b in ringsyncd ringsync-train-example ringsyncctl ringsync-bench; do \
      if [ -x "build/bin/$b" ]; then \
        objcopy --strip-debug "build/bin/$b" "/opt/ringsync/bin/$b"; \
      else \
        echo "image: build/bin/$b not built; not installed"; \
      fi; \
    done \
 && test -x /opt/ringsync/bin/ringsyncd \
 && test -x /opt/ringsync/bin/ringsync-train-example \
 && install -m 0755 deploy/healthcheck.sh /opt/ringsync/bin/ringsync-healthcheck

########################################################################## runtime stage
FROM debian:bookworm AS runtime

COPY deploy/install-deps.sh /tmp/install-deps.sh
RUN bash /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh

# A fixed uid/gid, so files on named volumes (the SDK socket) and the shared-memory
# tensors keep one owner across the worker and trainer containers and across rebuilds.
# /run/ringsync holds the worker's SDK socket; a named volume mounted there starts as a
# copy of this directory, ownership included.
# (--no-log-init: no sparse lastlog/faillog entries for a high uid.)
RUN groupadd --gid 10001 ringsync \
 && useradd --uid 10001 --gid ringsync --no-log-init --home-dir /var/lib/ringsync \
      --create-home --shell /usr/sbin/nologin ringsync \
 && install -d -o ringsync -g ringsync -m 0770 /run/ringsync

COPY --from=build /opt/ringsync/bin/ /opt/ringsync/bin/
ENV PATH=/opt/ringsync/bin:$PATH

# Documented ports. 7400: coordinator (--listen). 7401: worker ring peers (--peer_listen).
# 7402: worker SDK over TCP (--client_listen, optional; the unix socket is the fast path).
# Flags choose them; these are the defaults deploy/docker-compose.yml uses.
EXPOSE 7400 7401 7402

USER ringsync:ringsync
WORKDIR /var/lib/ringsync

# Works for either role: finds ringsyncd, reads its flags, and asks its port or socket
# (deploy/healthcheck.sh): a grpc.health.v1 check through ringsyncctl when the image has
# it, else port-accepts / socket-exists. Exec form: no /bin/sh in between.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/opt/ringsync/bin/ringsync-healthcheck"]

# `docker run IMAGE coordinator ...` / `docker run IMAGE worker ...`; the trainer
# overrides the entrypoint (--entrypoint ringsync-train-example).
ENTRYPOINT ["/opt/ringsync/bin/ringsyncd"]
CMD ["--help"]
