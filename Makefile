# Laconic: `make run` and `make test` are the whole quick start on a fresh Debian 12 machine.
# Each installs missing Debian packages (scripts/install-deps), configures, builds, then runs
# the default recipe or the whole test suite through CTest.

BUILD  ?= build
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
RECIPE ?= recipes/lamb_bert.toml
CMAKE_ARGS ?=

.PHONY: all deps configure build run test clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	./$(BUILD)/trainer --recipe $(RECIPE)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900

clean:
	rm -rf $(BUILD)
