# Thin wrapper over CMake. `make` builds into build/ with two jobs; `make test`
# and `make demo` first install missing Debian packages (scripts/install-deps.sh).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= 2
CMAKE_ARGS ?=

.PHONY: all deps build build-asan test test-release test-asan demo bench stress install clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

$(ASAN_DIR)/CMakeCache.txt:
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMPHORA_SANITIZE=ON \
	      -DAMPHORA_BUILD_BENCH=OFF $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

build-asan: deps $(ASAN_DIR)/CMakeCache.txt
	cmake --build $(ASAN_DIR) -j$(JOBS)

# Every test in the optimised build, then the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
test: test-release test-asan

test-release: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900

test-asan: build-asan
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure --timeout 1800 -LE no-sanitizer

demo: build
	rm -rf $(BUILD_DIR)/demo-store
	$(BUILD_DIR)/bin/amphora_tensor_demo $(BUILD_DIR)/demo-store
	$(BUILD_DIR)/bin/amphora --store $(BUILD_DIR)/demo-store ls
	$(BUILD_DIR)/bin/amphora --store $(BUILD_DIR)/demo-store verify

# Benchmarks and stress runs are programs, kept out of `make test`.
bench: build
	$(BUILD_DIR)/bin/amphora_bench $(BENCH_ARGS)

stress: build
	AMPHORA_TEST_SCALE=$${AMPHORA_TEST_SCALE:-8} $(BUILD_DIR)/bin/amphora_tests "[processes]"

install: build
	cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
