#!/usr/bin/env bash
# Builds llama.cpp once, from the llama.cpp that the pinned llama-cpp-python
# sdist vendors, for everything here that compares against llama.cpp:
#   - its shared libraries (libllama, libggml, libggml-base, libggml-cpu),
#     copied into .venv's llama_cpp/lib, where llama-cpp-python loads them:
#     scripts/setup.sh installs llama-cpp-python without compiling it
#     (CMAKE_ARGS=-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF: Python code only);
#   - llama.cpp's own draft-model speculative decoding example
#     (llama-speculative-simple), the llamacpp-draft baseline of
#     `specdec bench --llamacpp-spec`;
#   - the sdist's vocab test files and chat templates
#     (OUT_DIR/src/vendor/llama.cpp/models), real test data for the tokenizer
#     and chat-template tests.
# Before, pip compiled llama.cpp (and libmtmd) for llama-cpp-python and this
# script compiled it a second time for the example: the test command's
# set-up spent ~10 more minutes on a 2-core VM.
#
# CPU only, Release, -march=native (ggml's default, as pip's build would),
# OpenMP as found, RPATH $ORIGIN so the copied libraries find each other, and
# without ggml's AMX matmul: on a Xeon with AMX-INT8 (an "Intel Xeon
# Processor" VM with avx512_fp16 and amx_int8, 2026-12-02)
# ggml_backend_amx_mul_mat of 0.3.36 segfaulted on the first decode of every
# packaged model, although AMX itself works there (a tile dot-product probe
# ran). The explicit -mno-amx-* flags win over -march=native in GCC whatever
# their order. The tests' parity with ggml is with its vec_dot kernels anyway,
# which this leaves as they are.
#
#   tools/build_llamacpp.sh [OUT_DIR]     (default build/llamacpp)
#
# Steps: pip download of the llama-cpp-python sdist pinned by
# tools/requirements.txt, sha256 check, extract, cmake configure, build of the
# libraries and the example, libraries copied into .venv. Idempotent: a stamp
# holding the version, sha256 and flags makes a second run a copy check only.
# Prints the example's path. Env: JOBS (parallel compile jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-build/llamacpp}
TARGET=llama-speculative-simple
# The sdist's sha256 per llama-cpp-python version (pip download --no-binary :all:).
declare -A SDIST_SHA256=(
  [0.3.36]=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
)

VERSION=$(sed -n 's/^llama-cpp-python==\([^ #]*\).*/\1/p' tools/requirements.txt)
[ -n "$VERSION" ] || { echo "build_llamacpp: no llama-cpp-python==VERSION in tools/requirements.txt" >&2; exit 1; }
SHA=${SDIST_SHA256[$VERSION]:-}
[ -n "$SHA" ] || { echo "build_llamacpp: no pinned sha256 for llama-cpp-python $VERSION; add it to SDIST_SHA256 in $0" >&2; exit 1; }

PY=.venv/bin/python  # the project's environment, never a python3 from the PATH
[ -x "$PY" ] || { echo "[build_llamacpp] no $PY (run scripts/setup.sh)" >&2; exit 1; }
LIBS=(libllama.so libggml.so libggml-base.so libggml-cpu.so)
STAMP="$OUT/.stamp"
STAMP_WANT="$VERSION $SHA no-amx shared"
BIN="$OUT/cmake/bin/$TARGET"

# Copies LIBS (with their version links) into llama-cpp-python's own folder
# for its libraries: it loads lib/libllama.so next to its Python files.
copy_libs() {
  local pkg
  pkg=$("$PY" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); print(pathlib.Path(s.origin).parent if s else "")')
  [ -n "$pkg" ] || { echo "build_llamacpp: llama-cpp-python is not installed in .venv (scripts/setup.sh test installs it)" >&2; exit 1; }
  mkdir -p "$pkg/lib"
  # With their version links (libllama.so -> libllama.so.0 -> ...): a
  # library names its dependencies by soname. Only what differs is replaced,
  # and by rename, never written in place: a process that has the libraries
  # loaded (a pytest run whose bench test calls this script) would otherwise
  # see its mapped code change under it (it crashed in an unrelocated PLT
  # entry of libllama).
  local lib f name
  for lib in "${LIBS[@]}"; do
    for f in "$OUT/cmake/bin/$lib"*; do
      name=$(basename "$f")
      if [ -L "$f" ]; then
        [ "$(readlink "$pkg/lib/$name" 2>/dev/null)" = "$(readlink "$f")" ] || ln -sfn "$(readlink "$f")" "$pkg/lib/$name"
      elif ! cmp -s "$f" "$pkg/lib/$name"; then
        cp "$f" "$pkg/lib/$name.tmp.$$" && mv -f "$pkg/lib/$name.tmp.$$" "$pkg/lib/$name"
      fi
    done
  done
}

if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$STAMP_WANT" ]; then
  copy_libs
  echo "$BIN"
  exit 0
fi

mkdir -p "$OUT/dl"
SDIST="$OUT/dl/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ] || [ "$(sha256sum "$SDIST" | cut -d' ' -f1)" != "$SHA" ]; then
  rm -f "$SDIST"
  echo "[build_llamacpp] downloading the llama-cpp-python $VERSION sdist" >&2
  "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$OUT/dl" >&2
fi
got=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
  echo "build_llamacpp: sha256 mismatch for $SDIST: $got, expected $SHA" >&2
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
  { echo "build_llamacpp: $LLAMA has no examples/speculative-simple" >&2; exit 1; }

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# llama.cpp's own compiler warnings run to ~14k lines: keep them in a log and
# show its tail only when the build fails.
LOG="$OUT/build.log"
mkdir -p "$OUT"
echo "[build_llamacpp] building llama.cpp's libraries and $TARGET (several minutes; log: $LOG)" >&2
if ! { cmake -S "$LLAMA" -B "$OUT/cmake" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
         -DCMAKE_BUILD_RPATH='$ORIGIN' \
         -DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
         -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
         -DLLAMA_BUILD_EXAMPLES=ON -DGGML_CCACHE=OFF &&
       cmake --build "$OUT/cmake" --target llama "$TARGET" -j "${JOBS:-$(nproc)}"; } > "$LOG" 2>&1; then
  tail -n 60 "$LOG" >&2
  echo "build_llamacpp: the build failed; full log: $LOG" >&2
  exit 1
fi
for lib in "${LIBS[@]}"; do
  [ -f "$OUT/cmake/bin/$lib" ] || { echo "build_llamacpp: the build made no $OUT/cmake/bin/$lib" >&2; exit 1; }
done
echo "$STAMP_WANT" > "$STAMP"
copy_libs
echo "$BIN"
