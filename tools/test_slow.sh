#!/usr/bin/env bash
# The slow test job: every chapter's cells, including those marked `#| slow` (real models, benchmarks).
# CI's fast job runs plain `nbdev_test` (slow cells skipped).
#   bash tools/test_slow.sh            # all notebooks
#   bash tools/test_slow.sh nbs/09_generate.ipynb
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
if [ $# -gt 0 ]; then
  for nb in "$@"; do "$BIN/nbdev_test" --flags slow --path "$nb"; done
else
  "$BIN/nbdev_test" --flags slow --n_workers "${N_WORKERS:-1}" --timing
fi
