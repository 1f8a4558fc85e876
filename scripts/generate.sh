#!/usr/bin/env bash
# The main job: generate text on the default model (SmolLM2-135M-Instruct),
# installing dependencies, fetching the model and building first when needed.
#   scripts/generate.sh -p "Write a haiku about the sea" --chat
# Every option of `specdec generate` is accepted (see --help).
#
# Installs only what running needs (scripts/setup.sh run: no llama-cpp-python,
# which only the tests use), so a fresh machine reaches its first token in a
# few minutes: the compile and the model download show their progress on
# stderr; stdout carries only what `specdec generate` prints.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
if ! ninja -C build/release -n specdec 2>/dev/null | grep -q "no work to do"; then
  echo "[generate] building specdec (the first build takes a few minutes on 2 cores)" >&2
fi
scripts/build.sh release specdec >&2
.venv/bin/python tools/fetch_models.py >&2
exec build/release/specdec generate "$@"
