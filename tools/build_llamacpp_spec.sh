#!/usr/bin/env bash
# Builds llama.cpp's own draft-model speculative decoding example
# (llama-speculative-simple) from the llama.cpp that llama-cpp-python vendors,
# i.e. the same llama.cpp version as the AR and prompt-lookup baselines of
# `specdec bench --llamacpp`. CPU only, Release, -march=native (ggml's default,
# as pip's build of llama-cpp-python), without ggml's AMX matmul (it segfaulted
# on an AMX Xeon: scripts/setup.sh says more), OpenMP as found.
#
#   tools/build_llamacpp_spec.sh [OUT_DIR]     (default build/llamacpp-spec)
#
# Steps: pip download of the llama-cpp-python sdist pinned by
# tools/requirements.txt, sha256 check, extract, cmake configure, build of the
# one target, binary copied to OUT_DIR/bin. Idempotent: a stamp holding the
# version and sha256 makes a second run a no-op. Prints the binary's path.
#
# Not run by scripts/setup.sh: it compiles ggml, llama and llama-common
# (132 build steps, measured 591 CPU-seconds on the 2-core development VM,
# plus about 40 for the pip download) and is needed only for the benchmark's
# llama.cpp draft baseline and its tests (scripts/test.sh runs it first).
# Env: JOBS (parallel compile jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-build/llamacpp-spec}
TARGET=llama-speculative-simple
# The sdist's sha256 per llama-cpp-python version (pip download --no-binary :all:).
declare -A SDIST_SHA256=(
  [0.3.36]=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
)

VERSION=$(sed -n 's/^llama-cpp-python==\([^ #]*\).*/\1/p' tools/requirements.txt)
[ -n "$VERSION" ] || { echo "build_llamacpp_spec: no llama-cpp-python==VERSION in tools/requirements.txt" >&2; exit 1; }
SHA=${SDIST_SHA256[$VERSION]:-}
[ -n "$SHA" ] || { echo "build_llamacpp_spec: no pinned sha256 for llama-cpp-python $VERSION; add it to SDIST_SHA256 in $0" >&2; exit 1; }

STAMP="$OUT/.stamp"
BIN="$OUT/bin/$TARGET"
if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION $SHA no-amx" ]; then
  echo "$BIN"
  exit 0
fi

PY=.venv/bin/python  # the project's environment, never a python3 from the PATH
[ -x "$PY" ] || { echo "[build_llamacpp_spec] no $PY (run scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT/dl"
SDIST="$OUT/dl/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ] || [ "$(sha256sum "$SDIST" | cut -d' ' -f1)" != "$SHA" ]; then
  rm -f "$SDIST"
  echo "[build_llamacpp_spec] downloading the llama-cpp-python $VERSION sdist" >&2
  "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$OUT/dl" >&2
fi
got=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
  echo "build_llamacpp_spec: sha256 mismatch for $SDIST: $got, expected $SHA" >&2
  exit 1
fi

SRC="$OUT/src"
if [ "$(cat "$SRC/.sha256" 2>/dev/null)" != "$SHA" ]; then
  rm -rf "$SRC"
  mkdir -p "$SRC"
  tar -xzf "$SDIST" -C "$SRC" --strip-components=1
  echo "$SHA" > "$SRC/.sha256"
fi
LLAMA="$SRC/vendor/llama.cpp"
[ -f "$LLAMA/examples/speculative-simple/speculative-simple.cpp" ] ||
  { echo "build_llamacpp_spec: $LLAMA has no examples/speculative-simple" >&2; exit 1; }

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# llama.cpp's own compiler warnings run to ~14k lines: keep them in a log and
# show its tail only when the build fails.
LOG="$OUT/build.log"
mkdir -p "$OUT"
echo "[build_llamacpp_spec] building $TARGET (several minutes; log: $LOG)" >&2
if ! { cmake -S "$LLAMA" -B "$OUT/cmake" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
         -DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
         -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
         -DLLAMA_BUILD_EXAMPLES=ON -DGGML_CCACHE=OFF &&
       cmake --build "$OUT/cmake" --target "$TARGET" -j "${JOBS:-$(nproc)}"; } > "$LOG" 2>&1; then
  tail -n 60 "$LOG" >&2
  echo "build_llamacpp_spec: the build failed; full log: $LOG" >&2
  exit 1
fi
mkdir -p "$OUT/bin"
cp "$OUT/cmake/bin/$TARGET" "$BIN"
echo "$VERSION $SHA no-amx" > "$STAMP"
echo "$BIN"
