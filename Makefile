# The two commands: `make run` (build, then generate with the bundled model) and
# `make test` (build, then every test, plus the parser tests under ASan/UBSan).
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
SAN_BUILD ?= build-sanitize
MODEL ?= models/tiny-mixtral-f16.gguf
PROMPT ?= In the beginning God
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan run test test-release test-asan test-sanitize clean

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
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target test_formats test_tokenizer

test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -R '^(Gguf|Tokenizer)'

# Every suite under AddressSanitizer + UBSan, optimized so that the model and server suites
# finish (~11 min to build and ~4 min to run on 2 cores): not part of `make test`, which
# keeps CI short.
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(SAN_BUILD)
