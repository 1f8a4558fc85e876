#!/usr/bin/env bash
# Configures and builds one configuration into build/<name>:
#   release  optimised, warnings as errors (default)
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, for the unit tests
#   tsan     ThreadSanitizer, for the concurrency tests
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-release}
shift || true
case "$name" in
  release) flags=(-DCMAKE_BUILD_TYPE=Release -DSPECDEC_WERROR=ON) ;;
  asan)    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_WERROR=ON -DSPECDEC_SANITIZE=ON -DSPECDEC_BUILD_BENCH=OFF) ;;
  tsan)    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_WERROR=ON -DSPECDEC_TSAN=ON -DSPECDEC_BUILD_BENCH=OFF) ;;
  *) echo "unknown build '$name' (release, asan, tsan)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$name" -G Ninja "${flags[@]}" >/dev/null
ninja -C "build/$name" -j"$(nproc)" "$@"
