"""The command line the llama.cpp fixture scripts share: which real models to run (make_logit_fixtures.py,
make_greedy_fixtures.py). Run those scripts from the repository root with a Python that has llama-cpp-python."""
import argparse, sys
from pathlib import Path

def each_model(description: str):
    "Parse `--smollm2 PATH` and/or `--gemma3 PATH`; yield `(name, path)` for each one given."
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--smollm2", type=Path, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--gemma3", type=Path, help="gemma-3-270m-q4_k_m.gguf")
    args = ap.parse_args()
    if not (args.smollm2 or args.gemma3): ap.error("give --smollm2 and/or --gemma3")
    for name in ("smollm2", "gemma3"):
        path = getattr(args, name)
        if path is None: continue
        print(f"{name}: {path}", file=sys.stderr)
        yield name, path
