#!/usr/bin/env bash
# EAGLE-3 head for a packaged target, end to end: data -> train -> export.
#   tools/eagle3_pipeline.sh MODEL OUTDIR
# MODEL: a name from models/manifest.json. Leaves OUTDIR/data (features,
# tokens, responses, manifest: tools/eagle3_data.py), OUTDIR/train
# (checkpoint.pt, curve.json) and OUTDIR/head (config.json +
# model.safetensors, for `specdec generate --eagle3 OUTDIR/head`).
# Sizes come from the environment (defaults: a CI-sized head):
#   N_CHAT N_CODE MAX_NEW       prompts and response tokens (eagle3_data.py)
#   DRAFT_VOCAB N_FF TTT LR     head and objective (eagle3_train.py)
#   BATCH_TOKENS MAX_TOKENS MINUTES   training length (rows, wall minutes)
#   THREADS                     CPU threads for every stage
#   SPECDEC                     the engine binary the data stage runs (default build/release/specdec;
#                               a frozen copy keeps a long run off the binary that later builds replace)
#   TRAIN_ARGS                  more eagle3_train.py options (--val-every 10 --warmup 5 ...)
# Each stage resumes what an interrupted run left (RESUME=0 retrains from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: tools/eagle3_pipeline.sh MODEL OUTDIR}
out=${2:?usage: tools/eagle3_pipeline.sh MODEL OUTDIR}
PY=${PY:-.venv/bin/python}
TRAIN_PY=${TRAIN_PY:-.venv-train/bin/python}
[ -x "$TRAIN_PY" ] || { echo "eagle3_pipeline: $TRAIN_PY missing (scripts/setup.sh test makes it)" >&2; exit 2; }
resume=()
[ "${RESUME:-1}" = 1 ] && resume=(--resume)
"$PY" tools/eagle3_data.py --model "$model" --out "$out/data" --n-chat "${N_CHAT:-200}" \
  --n-code "${N_CODE:-100}" --max-new "${MAX_NEW:-256}" --threads "${THREADS:-2}" \
  --specdec "${SPECDEC:-build/release/specdec}"
"$TRAIN_PY" tools/eagle3_train.py --data "$out/data" --out "$out/train" --draft-vocab "${DRAFT_VOCAB:-8192}" \
  --n-ff "${N_FF:-0}" --ttt "${TTT:-3}" --lr "${LR:-3e-4}" --batch-tokens "${BATCH_TOKENS:-2048}" \
  --max-tokens "${MAX_TOKENS:-1000000}" --minutes "${MINUTES:-0}" --threads "${THREADS:-2}" \
  --export "$out/head" "${resume[@]}" ${TRAIN_ARGS:-}
