# The two commands of the README:
#   make demo   installs what is missing, builds, and runs the main job
#   make test   installs what is missing, builds, and runs every test
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# ccache hits across checkouts in different folders (CI clones afresh).
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps configure build test test-asan test-tsan test-containers fuzz demo bench clean

all: build

deps:
	bash deploy/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 600

# Only the container tests (also part of `make test`): the images built and the compose file
# run by podman (deploy/container-engine.sh); root, else skipped with the reason.
test-containers: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L containers

# The link, transport, ring and worker tests under ThreadSanitizer, in a build of their own.
# Debian's gRPC and protobuf are not instrumented: their accesses are ignored, and the
# suppressions file says which of gRPC's header code is dropped and why.
TSAN_TESTS = link_test grpc_transport_test grpc_stream_stress_test ring_test worker_unit_test
TSAN_OPTIONS_ALL = ignore_noninstrumented_modules=1 halt_on_error=1 second_deadlock_stack=1 \
  suppressions=$(CURDIR)/tools/sanitizers/tsan.supp
test-tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRINGSYNC_TSAN=ON -DRINGSYNC_CUDA=OFF
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS="$(TSAN_OPTIONS_ALL)" build-tsan/bin/$$t --gtest_brief=1; done

# libFuzzer over the peer frame decoder, the worker's and the coordinator's request checks
# (fuzz/), in a clang build of their own with ASan and UBSan. Each target runs
# FUZZ_SECONDS (FUZZ_RUNS=N: N inputs instead) from its seed corpus (fuzz/corpus/<target>)
# plus what earlier runs found (build-fuzz/corpus); a crash leaves its input in
# build-fuzz/artifacts and fails the target. Low priority: it shares the machine.
FUZZ_TARGETS = frame_decoder_fuzzer worker_request_fuzzer coordinator_request_fuzzer
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
fuzz: deps
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_CXX_COMPILER=clang++ \
	  -DRINGSYNC_FUZZ=ON -DRINGSYNC_CUDA=OFF
	cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t build-fuzz/artifacts; \
	  nice -n 19 build-fuzz/bin/$$t -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) \
	    -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/$$t- \
	    build-fuzz/corpus/$$t fuzz/corpus/$$t; done

demo: build
	$(BUILD_DIR)/bin/ringsync-demo

# The PyTorch quick start: client/python/examples/train_digits.py on a local cluster, 4
# ranks in each mode (DDP on the ringsync backend, DistributedOptimizer, DDP on gloo);
# loss and accuracy per epoch, step times, and a verdict.
.PHONY: demo-torch
demo-torch: build
	PYTHONPATH=$(BUILD_DIR)/python RINGSYNC_BIN_DIR=$(BUILD_DIR)/bin \
	  /usr/bin/python3 client/python/examples/train_digits.py

bench: build
	$(BUILD_DIR)/bin/reducer_bench
	$(BUILD_DIR)/bin/ring_bench

clean:
	rm -rf $(BUILD_DIR)
