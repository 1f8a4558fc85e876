#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer with ASan + UBSan) of the server's request
# parser, the chat template, the GGUF reader, the tokenizer and SSD's wire
# schema; docs/fuzzing.md.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to $FUZZ_SECONDS, else 30; TARGET is any of
# parse_request chat_template gguf tokenizer ssd_wire (default: all, one after another).
# Builds build/fuzz (clang, -DSPECDEC_FUZZ=ON; $FUZZ_BUILD_DIR overrides), then
# runs each target on its corpus build/fuzz/corpus-<target>/, which starts as
# a copy of tests/fuzz/corpus/<target>/ and keeps what libFuzzer adds (the
# source tree is never written). Exits non-zero when a target finds a crash, a
# leak, undefined behaviour, a timeout or an out-of-memory; the input is saved
# in build/fuzz/artifacts-<target>/ and the report is in build/fuzz/<target>.log.
# Reproduce with: build/fuzz/fuzz_<target> build/fuzz/artifacts-<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-${FUZZ_SECONDS:-30}}
shift || true
if [ $# -gt 0 ]; then targets=("$@"); else targets=(parse_request chat_template gguf tokenizer ssd_wire); fi
build=${FUZZ_BUILD_DIR:-build/fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}

# -g1: line tables are all a sanitizer report needs, and compile faster than -g.
# No -DNDEBUG, so that any assert() in the fuzzed code stays armed.
echo "== fuzz build ($build)" >&2
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSPECDEC_FUZZ=ON -DSPECDEC_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" >/dev/null
ninja -C "$build" -j"$jobs" fuzz >&2

# Inputs longer than these only slow the search down: the largest seed of
# each target fits with room to grow (request bodies and templates are a few
# KiB, the shrunk real-model GGUF headers up to ~32 KiB).
max_len() {
  case "$1" in
    parse_request) echo 8192 ;;
    chat_template) echo 16384 ;;
    gguf) echo 65536 ;;
    tokenizer) echo 4096 ;;
    *) echo 4096 ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
summary=()
for t in "${targets[@]}"; do
  bin="$build/fuzz_$t"
  [ -x "$bin" ] || { echo "no fuzz target '$t' ($bin)" >&2; exit 2; }
  corpus="$build/corpus-$t"
  art="$build/artifacts-$t"
  log="$build/$t.log"
  mkdir -p "$corpus" "$art"
  cp -R "tests/fuzz/corpus/$t/." "$corpus/"
  stamp="$build/.fuzz-start-$t"
  touch "$stamp"
  dict=()
  [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
  echo "== fuzz_$t for ${secs}s" >&2
  rc=0
  "$bin" -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$art/" -print_final_stats=1 "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?

  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  field() { sed -n "s/.* $1: *\([0-9]*\).*/\1/p" <<<"$last"; }
  # (a crash prints the final stats twice: keep the last)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  found=$(find "$art" -type f -newer "$stamp" \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
          -o -name 'oom-*' \) | wc -l)
  rm -f "$stamp"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    failed=1
    echo "!! fuzz_$t failed (exit $rc, $found new artifact(s) in $art); end of $log:" >&2
    tail -n 40 "$log" >&2
  fi
  summary+=("$(printf '%-14s execs=%-9s exec/s=%-6s cov=%-6s ft=%-6s corpus=%-12s crashes=%s' "$t" \
    "${execs:-?}" "${eps:-?}" "$(field cov)" "$(field ft)" "${corp:-?}" "$found")")
done

echo "== fuzz summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
