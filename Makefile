# Thin wrapper over CMake. `make` builds into build/ with two jobs; `make test`
# and `make demo` first install missing Debian packages (scripts/install-deps.sh).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
TSAN_DIR  ?= build-tsan
FUZZ_DIR  ?= build-fuzz
JOBS      ?= 2
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-tsan build-fuzz test test-release test-asan test-tsan test-fuzz fuzz fuzz-long fuzz-save-corpus demo bench stress remote-up remote-down install clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

# The sanitizer builds compile only what their tests run (no examples,
# benchmark or plugins), at -O1 with line tables only (-g1): reports still
# name files and lines, and the build takes far less than -O2 -g.
SANITIZER_CMAKE_ARGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	-DAMPHORA_BUILD_BENCH=OFF -DAMPHORA_BUILD_EXAMPLES=OFF -DAMPHORA_BUILD_PLUGINS=OFF -DAMPHORA_INSTALL=OFF

$(ASAN_DIR)/CMakeCache.txt:
	cmake -S . -B $(ASAN_DIR) -DAMPHORA_SANITIZE=ON $(SANITIZER_CMAKE_ARGS) $(CMAKE_ARGS)

$(TSAN_DIR)/CMakeCache.txt:
	cmake -S . -B $(TSAN_DIR) -DAMPHORA_TSAN=ON $(SANITIZER_CMAKE_ARGS) $(CMAKE_ARGS)

# Clang for libFuzzer: Debian 12's clang-16 (its default clang 14 has no
# std::source_location with GCC 12's library). Only the fuzz targets and what
# they need are built, at -O1 with line tables as the sanitizer builds are.
# A tree configured with another compiler (an older build-fuzz/) is
# configured afresh; its corpus and crash files stay.
FUZZ_CXX ?= clang++-16
$(FUZZ_DIR)/CMakeCache.txt:
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DAMPHORA_FUZZ=ON $(SANITIZER_CMAKE_ARGS) \
	      -DAMPHORA_BUILD_TESTS=OFF $(CMAKE_ARGS)

build-fuzz:
	@bash scripts/install-deps.sh --fuzz
	@cxx=$$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' $(FUZZ_DIR)/CMakeCache.txt 2>/dev/null); \
	if [ -n "$$cxx" ] && [ "$$(basename "$$cxx")" != "$(notdir $(FUZZ_CXX))" ]; then \
	  echo "$(FUZZ_DIR) was configured with $$cxx; configuring it again with $(FUZZ_CXX)"; \
	  rm -rf $(FUZZ_DIR)/CMakeCache.txt $(FUZZ_DIR)/CMakeFiles; \
	fi
	@$(MAKE) --no-print-directory $(FUZZ_DIR)/CMakeCache.txt
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target amphora_fuzz

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

build-asan: deps $(ASAN_DIR)/CMakeCache.txt
	cmake --build $(ASAN_DIR) -j$(JOBS) --target amphora_sanitizer_tests

build-tsan: deps $(TSAN_DIR)/CMakeCache.txt
	cmake --build $(TSAN_DIR) -j$(JOBS) --target amphora_sanitizer_tests

# Every test in the optimised build; then, under AddressSanitizer +
# UndefinedBehaviorSanitizer, all but the release-only ones (byte formats
# other tools read, installation, figures, examples); under ThreadSanitizer,
# those that start threads or processes (label threads); last, each fuzz
# target for FUZZ_SMOKE_SECONDS (test-fuzz). tests/CMakeLists.txt says which
# test carries which label.
test: test-release test-asan test-tsan test-fuzz

test-release: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j$(JOBS) -LE tsan-only

test-asan: build-asan
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure --timeout 1800 -j$(JOBS) -LE "release-only|tsan-only"

# Any race report fails its test: the process stops at the first one with a
# nonzero status. Not read from TSAN_OPTIONS itself, so a setting left in the
# environment cannot turn that off.
# die_after_fork=0: the fork test starts threads in a child on purpose (the
# worker pool is rebuilt there), which TSan otherwise refuses.
# atexit_sleep_ms=0: the pool's idle workers outlive main by design; TSan's
# default one-second wait for them at exit would add a second to every CLI run.
AMPHORA_TSAN_OPTIONS ?= halt_on_error=1 exitcode=66 second_deadlock_stack=1 die_after_fork=0 atexit_sleep_ms=0

test-tsan: build-tsan
	cd $(TSAN_DIR) && TSAN_OPTIONS="$(AMPHORA_TSAN_OPTIONS)" \
	  ctest --output-on-failure --timeout 3600 -j$(JOBS) -L threads

# Each libFuzzer target for FUZZ_SECONDS (see fuzz/run.sh), its corpus kept
# in $(FUZZ_DIR)/fuzz-corpus across runs.
FUZZ_SECONDS ?= 60

fuzz: build-fuzz
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# Long runs (make fuzz-long FUZZ_SECONDS=36000): the targets built in
# $(FUZZ_LONG_DIR) with LeakSanitizer in place of AddressSanitizer, at -O2,
# run with libFuzzer's entropic scheduling off, and the standard containers
# and nlohmann::json left uninstrumented (fuzz/uninstrumented.txt): about
# three times the executions a second, with the same invariants,
# UndefinedBehaviorSanitizer and leak checks. They grow build-fuzz's corpus,
# which is then replayed under AddressSanitizer (each input once), so every
# input they found has also run with its memory checked.
FUZZ_LONG_DIR ?= build-fuzz-leak
# Executions per libFuzzer process in a long run: that build's resident
# memory grows about 4 KiB per execution (in its runtime, not in Amphora;
# README), so a fresh process takes over from the corpus well before 2 GiB.
FUZZ_LONG_SEGMENT ?= 400000
$(FUZZ_LONG_DIR)/CMakeCache.txt:
	cmake -S . -B $(FUZZ_LONG_DIR) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DAMPHORA_FUZZ=ON -DAMPHORA_FUZZ_SANITIZER=leak \
	      $(SANITIZER_CMAKE_ARGS) "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DAMPHORA_BUILD_TESTS=OFF $(CMAKE_ARGS)

fuzz-long: build-fuzz
	@$(MAKE) --no-print-directory $(FUZZ_LONG_DIR)/CMakeCache.txt
	cmake --build $(FUZZ_LONG_DIR) -j$(JOBS) --target amphora_fuzz
	FUZZ_CORPUS_DIR=$(FUZZ_DIR)/fuzz-corpus FUZZ_ARGS=-entropic=0 FUZZ_SEGMENT_RUNS=$(FUZZ_LONG_SEGMENT) \
	  bash fuzz/run.sh $(FUZZ_LONG_DIR) $(FUZZ_SECONDS)
	FUZZ_RUNS=0 bash fuzz/run.sh $(FUZZ_DIR)

# What fuzzing found, kept in the repository for the next machine: each
# corpus in $(FUZZ_DIR)/fuzz-corpus (or FUZZ_CORPUS_DIR) merged with
# fuzz/corpus/TARGET.tar.gz into the smallest set covering the same features,
# every input run once more under AddressSanitizer on the way
# (fuzz/save_corpus.sh). FUZZ_TARGETS="csv composite" saves only those.
fuzz-save-corpus: build-fuzz
	bash fuzz/save_corpus.sh $(FUZZ_DIR) $(or $(FUZZ_CORPUS_DIR),$(FUZZ_DIR)/fuzz-corpus) $(FUZZ_TARGETS)

# The fuzz targets built and each run for FUZZ_SMOKE_SECONDS from its seeds
# alone, with a fixed random seed (fuzz/run.sh --smoke), so that they keep
# building and their invariants keep holding; any finding fails the test.
FUZZ_SMOKE_SECONDS ?= 3

test-fuzz: build-fuzz
	bash fuzz/run.sh --smoke $(FUZZ_DIR) $(FUZZ_SMOKE_SECONDS)

# The document-frequency pipeline run twice (the second from the cache) and
# once with another top_k; the store is $AMPHORA_STORE, else a fresh
# $(BUILD_DIR)/demo-store (scripts/demo.sh).
demo: build
	bash scripts/demo.sh $(BUILD_DIR)

# Benchmarks and stress runs are programs, kept out of `make test`.
# The bench's own packages (HDF5, PyTables) come first, then a configure
# so the build finds them.
bench: build
	bash scripts/install-deps.sh --bench
	cmake -S . -B $(BUILD_DIR) > /dev/null
	cmake --build $(BUILD_DIR) -j$(JOBS) --target amphora_bench
	$(BUILD_DIR)/bin/amphora_bench $(BENCH_ARGS)

stress: build
	AMPHORA_TEST_SCALE=$${AMPHORA_TEST_SCALE:-8} $(BUILD_DIR)/bin/amphora_tests "[processes],[stress]"
	AMPHORA_IMPORT_TEST_MB=$${AMPHORA_IMPORT_TEST_MB:-2048} /usr/bin/python3 tests/python/test_import_memory.py \
	  --cli $(BUILD_DIR)/bin/amphora

# A one-node Ceph RADOS Gateway on 127.0.0.1 (in memory; scripts/rgw.sh),
# the S3 server the remote tier's tests start for themselves, for a
# developer: remote-up prints its endpoint and test keys (also in
# $(RGW_DIR)/env); remote-down stops it and removes $(RGW_DIR).
RGW_DIR ?= $(BUILD_DIR)/rgw

remote-up: deps
	bash scripts/rgw.sh up $(RGW_DIR)

remote-down:
	bash scripts/rgw.sh down $(RGW_DIR)

install: build
	cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
