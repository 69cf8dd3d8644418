# Laconic: `make run` and `make test` are the whole quick start on a fresh Debian 12 machine.
# Each installs missing Debian packages (scripts/install-deps; `make test` also the PyPI environment
# of the torch 2.x tests), configures, builds, then runs the default recipe or the whole test suite
# through CTest.

BUILD  ?= build
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
RECIPE ?= recipes/lamb_bert.toml
CMAKE_ARGS ?=
CTEST_ARGS ?=
PREFIX ?= /usr/local

.PHONY: all deps deps-pypi configure build run test test-fast install test-asan test-asan-ci test-tsan clean

all: build

deps:
	@scripts/install-deps

# The tests also run laconic.torch under torch 2.x from PyPI (a virtual environment outside the
# checkout, scripts/install-deps); `make run` stays Debian's packages only.
deps-pypi:
	@scripts/install-deps --pypi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The run needs the trainer alone: the tests and benchmarks are built by `make test` (or `make build`).
run: configure
	@cmake --build $(BUILD) -j$(JOBS) --target trainer
	./$(BUILD)/trainer --recipe $(RECIPE)

test: deps-pypi build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900 $(CTEST_ARGS)

# The unit tier alone (CTest label "unit", docs/testing.md): the gtest suites and the MPI suites,
# about two minutes on 2 cores after a build. `ctest -L e2e`, `-L slow`, `-LE slow` pick others.
test-fast: build
	@cd $(BUILD) && ctest -L unit --output-on-failure -j$(JOBS) --timeout 900 $(CTEST_ARGS)

# The libraries, headers, CMake package, programs and scripts under PREFIX (docs/library.md "Using Laconic
# as a library"): make install PREFIX=$$HOME/.local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Sanitizer builds (docs/reliability.md "Sanitizers"): the same deps, configure, build and CTest as `make test`,
# each in its own build folder, configured with LACONIC_SANITIZE (CUDA off; the sanitizer options
# are the tests' CTest ENVIRONMENT, tests/CMakeLists.txt).
#   test-asan: AddressSanitizer + UndefinedBehaviorSanitizer, build-asan/, MPI tests included.
#   test-tsan: ThreadSanitizer, build-tsan/, threads backend only: configure turns MPI off, so the
#              mpi.* tests do not exist, cli.mpi_train skips itself and cli.collbench_sweep runs
#              only its threads-backend rows.
# Left out because they are too slow under the sanitizer, not because of a finding:
#   cli.compression_convergence  8 workers x 5 epochs of Fashion-MNIST for each of 4 strategies:
#                                ~2 min in Release, many more under the sanitizers. The
#                                strategies' code runs under both sanitizers in tests/compression,
#                                tests/sync and cli.compare.
#   cli.real_link                times training steps across a rate-limited link against their
#                                replay; a sanitizer's slowdown is not what it measures. Its code
#                                (trace, replay) runs under both in tests/sim.
#   cli.outer_convergence        6 strategies x 300 steps of 8 workers across two datacenters: under
#                                a minute in Release; the strategies' code runs under both
#                                sanitizers in tests/compression, tests/sync and tests/train.
#   cli.cross_dc_study           the cross-datacenter study at 4 steps: 10 BERT runs' start-up.
#   cli.projection               replays of 1,024 and 10,000 ranks with bounds on their time and
#                                memory: under a sanitizer SimGrid's actors are threads (20,000 of
#                                them). The projection's code runs under both as Projection.* in
#                                tests/sim.
ASAN_EXCLUDE ?= ^cli\.(compression_convergence|real_link|outer_convergence|cross_dc_study|projection)
TSAN_EXCLUDE ?= ^cli\.(compression_convergence|real_link|outer_convergence|cross_dc_study|projection)
# CI (.ci/run) runs the ASan suite after `make test`, leaving out also the slowest end-to-end
# runs under ASan (2-6 minutes together on 2 cores): their code is the unit suites', which run
# (cli.signals' 6000-step runs: Stop.* stop and resume under ASan; cli.elastic's six 3-process
# BERT runs: Elastic.* and Gloo.* run its protocol and transport under ASan; the two 3-process
# elastic runs of cli.registered_components: Registry.* and Registered.* run the registrations;
# "elastic" also leaves out cli.elastic_faults and cli.elastic_signals, 3-replica runs whose checks
# run under ASan as ElasticAggregate.* and whose supervisor is cli.elastic's). Of the golden runs
# (bit for bit in `make test`), ASan keeps the small ones and one cross-datacenter run per kind
# (cross_dc_allreduce, cross_dc_diloco, cross_dc_streaming_diloco): each other strategy's class runs
# under ASan in tests/sync, the GPT and BERT in tests/models and tests/train; the 8-to-64-rank
# projections run in tests/sim at 8 ranks (Projection.*); cli.bf16_quality's bf16 GEMMs in tests/nn.
# About 16 minutes of ASan test time less, 8 on the wall clock of 2 cores.
ASAN_CI_GOLDEN_EXCLUDE = Golden\.RecipeMatchesItsGoldenRun/(gpt_fortunes|lamb_bert|cross_dc_(async_diloco|demo|desloc|eager_diloco|local_sgd|muloco|noloco|powersgd|sparseloco|sparta))|Projection8To64|^cli\.bf16_quality
ASAN_CI_EXCLUDE = ^cli\.(compression_convergence|real_link|outer_convergence|cross_dc_study|collbench_sweep|lamb_bert_smoke|mpi_train|train_smoke|studies|signals|elastic|registered_components|projection)|$(ASAN_CI_GOLDEN_EXCLUDE)

test-asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan \
	  CMAKE_ARGS="$(CMAKE_ARGS) -DLACONIC_SANITIZE=address" CTEST_ARGS="-E '$(ASAN_EXCLUDE)' $(CTEST_ARGS)"

test-asan-ci:
	@$(MAKE) --no-print-directory test-asan ASAN_EXCLUDE='$(ASAN_CI_EXCLUDE)'

test-tsan:
	@$(MAKE) --no-print-directory test BUILD=build-tsan \
	  CMAKE_ARGS="$(CMAKE_ARGS) -DLACONIC_SANITIZE=thread" CTEST_ARGS="-E '$(TSAN_EXCLUDE)' $(CTEST_ARGS)"

clean:
	rm -rf $(BUILD)
