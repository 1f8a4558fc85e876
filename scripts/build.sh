#!/usr/bin/env bash
# Configures and builds one configuration into build/<name>:
#   release  optimised, warnings as errors (default)
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, for the unit tests
#   tsan     ThreadSanitizer, for the concurrency tests
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-release}
shift || true
# Sanitizer builds: -O1 -g1. -g1 (line tables, all a sanitizer report needs)
# instead of -g: GCC's code does not depend on the debug level, and on a
# 2-core Zen 3 it compiled a file 25 % faster (21.6 -> 16.2 s). -O1 instead
# of -O2: on a 2-core Zen 1 src/sched/ssd_scheduler.cpp compiled in 51 s at
# -O2 and 33 s at -O1 under ASan+UBSan (TSan 14.2 -> 11.5 s); the two
# sanitizer builds were the largest part of the test command's time, and
# their tests run on tiny synthetic models where the level matters little.
san_debug=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
# ccache, when installed (scripts/setup.sh test installs it), with paths
# relative to the checkout so that the Python wheel's build (build/python)
# hits the objects of build/release.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
case "$name" in
  release) flags=(-DCMAKE_BUILD_TYPE=Release -DSPECDEC_WERROR=ON) ;;
  asan)    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "${san_debug[@]}" -DSPECDEC_WERROR=ON -DSPECDEC_SANITIZE=ON -DSPECDEC_BUILD_BENCH=OFF) ;;
  tsan)    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "${san_debug[@]}" -DSPECDEC_WERROR=ON -DSPECDEC_TSAN=ON -DSPECDEC_BUILD_BENCH=OFF) ;;
  *) echo "unknown build '$name' (release, asan, tsan)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$name" -G Ninja "${flags[@]}" "${launcher[@]}" >/dev/null
ninja -C "build/$name" -j"$(nproc)" "$@"
