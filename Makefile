# The two commands: `make run` (build, then generate with the bundled model) and
# `make test` (build, then every test, plus the parser tests under ASan/UBSan).
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
SAN_BUILD ?= build-sanitize
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
# Every target has a seed folder (FuzzCorpus checks it).
FUZZ_TARGETS ?= $(notdir $(wildcard tests/fuzz/corpus/*))
MODEL ?= models/tiny-mixtral-f16.gguf
PROMPT ?= In the beginning God
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan run test test-release test-asan test-sanitize test-tsan fuzz clean

all: build

deps:
	@bash scripts/install-deps

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target switchyard
	./$(BUILD)/switchyard generate -m $(MODEL) -p "$(PROMPT)" -n 48 --temp 0

test: test-release test-asan

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Parsers (GGUF, tokenizer) again under AddressSanitizer + UBSan.
build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSY_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target test_formats test_tokenizer test_base

test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -R '^(Gguf|Tokenizer|MemoryInfo|Cgroup|CpuInfo|HugePages)'

# Every suite under AddressSanitizer + UBSan, optimized so that the model and server suites
# finish (~11 min to build and ~4 min to run on 2 cores): not part of `make test`, which
# keeps CI short.
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) --timeout 900

# Every suite under ThreadSanitizer: the thread pool, the expert store's I/O threads and
# prefetch, the engine thread, the HTTP server and loadgen, in-process ranks (~6 min to
# build and ~10 min to run on 2 cores; the perplexity tests, 10 min of single-stream
# numerics under TSan, are left out). Not part of `make test`, which keeps CI short.
# Server tests start `switchyard serve`, which inherits TSAN_OPTIONS: a race there fails
# its test too.
TSAN_RUN_OPTIONS = suppressions=$(CURDIR)/tests/tsan_suppressions.txt halt_on_error=1 second_deadlock_stack=1
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_TSAN=ON $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="$(TSAN_RUN_OPTIONS)" ctest --output-on-failure -j $(JOBS) --timeout 1800 -E '^Perplexity[.]'

# Each parser of untrusted input under libFuzzer with ASan/UBSan for FUZZ_SECONDS, starting
# from the seeds in tests/fuzz/corpus/<target> (new inputs go to $(FUZZ_BUILD)/corpus, what
# crashes to $(FUZZ_BUILD)/crashes: copy those into tests/fuzz/corpus once fixed, so that
# `make test` replays them). Needs clang: installed by `scripts/install-deps --fuzz`.
fuzz:
	@bash scripts/install-deps --fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DSY_FUZZ=ON -DSY_BUILD_TESTS=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_parsers
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crashes/$$t; \
	  echo "fuzz $$t: $(FUZZ_SECONDS) s"; \
	  if ! SY_FUZZ_TARGET=$$t ASAN_OPTIONS=detect_leaks=0 ./$(FUZZ_BUILD)/fuzz_parsers -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 \
	      -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t/ $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	      > $(FUZZ_BUILD)/fuzz_$$t.log 2>&1; then tail -40 $(FUZZ_BUILD)/fuzz_$$t.log; exit 1; fi; \
	  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' $(FUZZ_BUILD)/fuzz_$$t.log; \
	done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
