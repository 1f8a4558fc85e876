#!/usr/bin/env bash
# Runs, or resumes, issue #7's full EAGLE-style protocol on the qwen pair
# (docs/benchmarks.md, "Full protocol"): every HumanEval problem plus as many
# two-turn ShareGPT chats, every method, the llama.cpp baselines, plots.
# It takes hours; each finished turn is checkpointed, so run it in slices:
#   scripts/bench_protocol.sh --stop-after 60     # ~45 min on a quiet 2-core VM
#   scripts/bench_protocol.sh                     # goes on to the end
#   setsid scripts/bench_protocol.sh >> reports/bench-eagle.log 2>&1 &
#                                                 # in the background: own session,
#                                                 # see the autogroup note below
# Extra arguments go to `specdec bench` (e.g. --shard 1/2, -t 4).
#
# Why a script and not just the command:
# - the benchmark runs a frozen copy of the binary (build/protocol/specdec),
#   so rebuilding build/release during a run cannot change it mid-way; every
#   checkpointed turn records the git revision that made it;
# - it asks the kernel to favour the benchmark's scheduling group. Linux
#   shares CPU time between autogroups (sessions) first and only then by
#   nice inside each, so a `nice -n 19` build started from another shell still
#   takes half the machine from the benchmark; a negative autogroup nice
#   (root or CAP_SYS_NICE) is what keeps the measured turns undisturbed.
#   The priority is the session's: run the script in a session of its own
#   (setsid), or every later command of the shell that started it gets it too.
# Stop it with SIGTERM or Ctrl-C: at most the turn in flight is lost.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${SPECDEC_PROTOCOL_OUT:-reports/bench-eagle}

scripts/setup.sh
.venv/bin/python tools/fetch_models.py --all >&2
scripts/build.sh release specdec >/dev/null
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "bench_protocol: the tree has uncommitted changes; its turns will be recorded as <rev>-dirty" >&2
fi
mkdir -p build/protocol "$out"
cp build/release/specdec build/protocol/specdec.new
mv build/protocol/specdec.new build/protocol/specdec

if ! echo -20 > /proc/self/autogroup 2>/dev/null; then
  echo "bench_protocol: cannot raise this session's CPU share (not root?); keep the machine otherwise idle" >&2
fi
exec build/protocol/specdec bench --protocol eagle \
  -m qwen2.5-coder-1.5b-instruct-q4_k_m -d qwen2.5-coder-0.5b-instruct-q4_k_m -t 2 -o "$out" "$@"
