#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: installs, fetches the real
# models, builds the release and sanitizer configurations, runs the C++ tests
# (kernels, GGUF fuzzing, model and speculation tests) and the Python tests
# that compare specdec with llama.cpp (llama-cpp-python).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says when it started: the CI log then shows where the
# time goes (the whole command must stay well inside CI's 90 minutes).
t_start=$SECONDS
step() { local t=$((SECONDS - t_start)); echo "== [$((t / 60)) min $((t % 60)) s] $*" >&2; }

step "set-up (scripts/setup.sh test)"
scripts/setup.sh
step "models"
.venv/bin/python tools/fetch_models.py --all >&2

step "release build (warnings are errors)"
scripts/build.sh release
step "C++ tests (release)"
(cd build/release && ctest --output-on-failure -j2 --timeout 1200)

# The sanitizer step takes 1/8 of the chi-square tests' draws
# (tests/unit/distribution_test_support.h): the release step keeps full power.
step "C++ unit tests under AddressSanitizer + UBSan (suites on real models, named Real*, run in release only)"
scripts/build.sh asan specdec_tests
SPECDEC_TEST_DRAWS_DIVISOR=8 ASAN_OPTIONS=detect_leaks=1 \
  build/asan/specdec_tests --gtest_filter='-Real*' --gtest_brief=1

# The concurrency suites (SSD's target side, draft worker and speculation
# cache; the thread pool; the batched scheduler on a 2-thread pool) on
# synthetic models, under ThreadSanitizer: any data race or lock-order
# inversion fails the step (halt_on_error), and `timeout` turns a deadlock
# into a failure instead of a hung CI job. The TSan build compiles only the
# test files of these suites (CMakeLists.txt names them).
# SsdSampling is left out: its chi-square tests run ~100k short SSD runs (far
# too slow under TSan) through the same worker paths the greedy suites cover;
# it runs in the release and ASan steps. RealSsdStops (smollm2) takes ~17 min
# under TSan on a loaded 2-core machine, so it runs in release only.
TSAN_TESTS='ThreadPool.*:Ssd*:*SsdGreedyBranchMode.*:SchedSync.*:SchedSpecBatch.*:ServerHttp.*-SsdSampling.*'
step "concurrency tests under ThreadSanitizer (SSD, thread pool, batched scheduler)"
scripts/build.sh tsan specdec_tests
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" timeout 900 \
  build/tsan/specdec_tests --gtest_filter="$TSAN_TESTS" --gtest_brief=1

step "coverage-guided fuzzing, 30 s per target (libFuzzer + ASan/UBSan; docs/fuzzing.md)"
scripts/fuzz.sh 30

step "Python tests against llama.cpp"
SPECDEC_BIN="$PWD/build/release/specdec" \
  .venv/bin/python -m pytest -q --durations=25 tests/python
step "done"
