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

# Every test under AddressSanitizer + UndefinedBehaviorSanitizer, in a build of their own,
# except the labels that cannot run there: containers (they build release images from the
# Dockerfile and never run this build's binaries), cluster (root, network namespaces and
# the machine-wide lock; the same daemons run under ASan in the integration tests) and
# python (an instrumented extension cannot load into Debian's uninstrumented python3).
# Every process, the daemons the tests start included, writes its ASan reports (leaks too)
# to build-asan/sanitizer-reports/; any report fails the target. UBSan stops the process
# at the first undefined behaviour, with the report on its stderr (gcc's UBSan ignores
# log_path).
ASAN_EXCLUDED_LABELS = containers|cluster|python
ASAN_REPORTS = $(CURDIR)/build-asan/sanitizer-reports
test-asan: export ASAN_OPTIONS = detect_leaks=1 strict_string_checks=1 \
  detect_stack_use_after_return=1 check_initialization_order=1 log_path=$(ASAN_REPORTS)/asan
test-asan: export UBSAN_OPTIONS = print_stacktrace=1 halt_on_error=1
test-asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRINGSYNC_ASAN=ON -DRINGSYNC_CUDA=OFF
	rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS)
	cmake --build build-asan -j $(JOBS)
	@status=0; ctest --test-dir build-asan --output-on-failure -j $(JOBS) --timeout 900 \
	  -LE '$(ASAN_EXCLUDED_LABELS)' || status=1; \
	if [ -n "$$(ls -A $(ASAN_REPORTS))" ]; then cat $(ASAN_REPORTS)/*; status=1; \
	  echo "test-asan: sanitizer reports above (build-asan/sanitizer-reports)"; fi; \
	exit $$status

# The link, transport, ring, worker, coordinator and HTTP tests under
# ThreadSanitizer, in a build of their own. e2e_test is not among them: under TSan's
# slowdown its memory bounds (TSan's shadow counts in RSS) and its heartbeat-timed specs
# fail, and it takes over an hour and a half on 2 cores; run by hand, its reports were gRPC's own
# hand-offs (suppressed below) and the SDK's call channel (ordered in wire/reaction_order.h).
# Debian's gRPC and protobuf are not instrumented: their accesses
# are ignored, and the suppressions file says which of gRPC's header code is dropped and
# why. Every process writes its reports to build-tsan/sanitizer-reports/; any report
# fails the target. The binaries run JOBS at a time (tools/sanitizers/run_gtests.sh),
# the longest first and ring_test (7-8 minutes under TSan on 2 cores) in three shards, each
# with its output in build-tsan/test-logs/, printed when it fails.
TSAN_RUNS = ring_test:3 grpc_transport_test grpc_stream_stress_test coordinator_server_test \
  worker_unit_test http_endpoint_test tcp_transport_test shm_unit_test sync_test link_test
TSAN_TESTS = $(foreach run,$(TSAN_RUNS),$(firstword $(subst :, ,$(run))))
TSAN_REPORTS = $(CURDIR)/build-tsan/sanitizer-reports
test-tsan: export TSAN_OPTIONS = ignore_noninstrumented_modules=1 halt_on_error=1 \
  second_deadlock_stack=1 suppressions=$(CURDIR)/tools/sanitizers/tsan.supp \
  log_path=$(TSAN_REPORTS)/tsan
test-tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRINGSYNC_TSAN=ON -DRINGSYNC_CUDA=OFF
	rm -rf $(TSAN_REPORTS) && mkdir -p $(TSAN_REPORTS)
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	@status=0; tools/sanitizers/run_gtests.sh $(JOBS) build-tsan/test-logs build-tsan/bin \
	  $(TSAN_RUNS) || status=1; \
	if [ -n "$$(ls -A $(TSAN_REPORTS))" ]; then cat $(TSAN_REPORTS)/*; status=1; \
	  echo "test-tsan: ThreadSanitizer reports above (build-tsan/sanitizer-reports)"; fi; \
	exit $$status

# libFuzzer over the peer frame decoder, the worker's and the coordinator's request checks
# (fuzz/), in a clang build of their own with ASan and UBSan. Each target runs
# FUZZ_SECONDS (FUZZ_RUNS=N: N inputs instead) from its seed corpus (fuzz/corpus/<target>)
# plus what earlier runs found (build-fuzz/corpus); a crash leaves its input in
# build-fuzz/artifacts and fails the target. Low priority: it shares the machine.
FUZZ_TARGETS = frame_decoder_fuzzer worker_request_fuzzer coordinator_request_fuzzer \
  frame_mailbox_fuzzer arrival_marks_fuzzer
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

.PHONY: demo-torch-elastic
demo-torch-elastic: build
	PYTHONPATH=$(BUILD_DIR)/python RINGSYNC_BIN_DIR=$(BUILD_DIR)/bin \
	  /usr/bin/python3 client/python/examples/train_digits_elastic.py

bench: build
	$(BUILD_DIR)/bin/reducer_bench
	$(BUILD_DIR)/bin/ring_bench

clean:
	rm -rf $(BUILD_DIR)
