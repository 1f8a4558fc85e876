#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: installs, fetches the real
# models, builds the release and sanitizer configurations, runs the C++ tests
# (kernels, GGUF fuzzing, model and speculation tests) and the Python tests
# that compare specdec with llama.cpp (llama-cpp-python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python tools/fetch_models.py --all >&2

echo "== release build (warnings are errors)" >&2
scripts/build.sh release
echo "== C++ tests (release)" >&2
(cd build/release && ctest --output-on-failure -j2 --timeout 1200)

echo "== C++ unit tests under AddressSanitizer + UBSan (suites on real models, named Real*, run in release only)" >&2
scripts/build.sh asan specdec_tests
ASAN_OPTIONS=detect_leaks=1 build/asan/specdec_tests --gtest_filter='-Real*' --gtest_brief=1

echo "== Python tests against llama.cpp" >&2
SPECDEC_BIN="$PWD/build/release/specdec" \
  .venv/bin/python -m pytest -q tests/python
