# Thin wrapper over CMake. `make` builds into build/ with two jobs; `make test`
# and `make demo` first install missing Debian packages (scripts/install-deps.sh).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
TSAN_DIR  ?= build-tsan
FUZZ_DIR  ?= build-fuzz
JOBS      ?= 2
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-tsan test test-release test-asan test-tsan fuzz demo bench stress install clean

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

# Clang for libFuzzer; only the fuzz targets and what they need are built.
$(FUZZ_DIR)/CMakeCache.txt:
	@bash scripts/install-deps.sh --fuzz
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DAMPHORA_FUZZ=ON \
	      -DAMPHORA_BUILD_TESTS=OFF -DAMPHORA_BUILD_EXAMPLES=OFF -DAMPHORA_BUILD_BENCH=OFF \
	      -DAMPHORA_BUILD_PLUGINS=OFF -DAMPHORA_INSTALL=OFF $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

build-asan: deps $(ASAN_DIR)/CMakeCache.txt
	cmake --build $(ASAN_DIR) -j$(JOBS) --target amphora_sanitizer_tests

build-tsan: deps $(TSAN_DIR)/CMakeCache.txt
	cmake --build $(TSAN_DIR) -j$(JOBS) --target amphora_sanitizer_tests

# Every test in the optimised build; then, under AddressSanitizer +
# UndefinedBehaviorSanitizer, all but the release-only ones (byte formats
# other tools read, installation, figures, examples); under ThreadSanitizer,
# those that start threads or processes (label threads). tests/CMakeLists.txt
# says which test carries which label.
test: test-release test-asan test-tsan

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

# Each libFuzzer target for FUZZ_SECONDS (see fuzz/run.sh); not part of `make test`.
FUZZ_SECONDS ?= 60

fuzz: $(FUZZ_DIR)/CMakeCache.txt
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target amphora_fuzz
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The document-frequency pipeline run twice (the second from the cache) and
# once with another top_k; the store is $AMPHORA_STORE, else a fresh
# $(BUILD_DIR)/demo-store (scripts/demo.sh).
demo: build
	bash scripts/demo.sh $(BUILD_DIR)

# Benchmarks and stress runs are programs, kept out of `make test`.
bench: build
	$(BUILD_DIR)/bin/amphora_bench $(BENCH_ARGS)

stress: build
	AMPHORA_TEST_SCALE=$${AMPHORA_TEST_SCALE:-8} $(BUILD_DIR)/bin/amphora_tests "[processes],[stress]"
	AMPHORA_IMPORT_TEST_MB=$${AMPHORA_IMPORT_TEST_MB:-2048} /usr/bin/python3 tests/python/test_import_memory.py \
	  --cli $(BUILD_DIR)/bin/amphora

install: build
	cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
