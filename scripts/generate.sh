#!/usr/bin/env bash
# The main job: generate text on the default model (SmolLM2-135M-Instruct),
# installing dependencies, fetching the model and building first when needed.
#   scripts/generate.sh -p "Write a haiku about the sea" --chat
# Every option of `specdec generate` is accepted (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release specdec >/dev/null
.venv/bin/python tools/fetch_models.py >&2
exec build/release/specdec generate "$@"
