"""Tokenizer speed: llmbook against llama.cpp on 100 kB of English, in characters per second.

    python bench/tokenizer.py [--smollm2 PATH] [--gemma3 PATH] [--refpy PYTHON_WITH_LLAMA_CPP] [--json]

The text is the first 100 000 characters of Python's own documentation (`pydoc_data.topics`), so both
sides read the same bytes without a download. llmbook is timed cold (empty word cache: the first encode
of a new text) and warm (the same text again), with the time `Tokenizer(metadata)` takes and the memory
it keeps (tracemalloc: Python's allocations, so not the C++ side of the `sentencepiece` package).
llama.cpp, through llama-cpp-python's `llama_tokenize`, runs in `--refpy` (default: $REFPY) and is
skipped when none is given.
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

N_CHARS = 100_000


def english_text(n=N_CHARS) -> str:
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))[:n]


def tokenizer_cost(metadata: dict, repeats: int = 3) -> dict:
    """Time of `Tokenizer(metadata)` (best of `repeats`) and the MB it keeps after a first encode
    (tracemalloc: Python's allocations only, not the C++ of the sentencepiece package)."""
    import gc, tracemalloc
    from llmbook.tokenizer import Tokenizer
    from llmbook.tokenizer_extras import EXTRAS
    init = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter(); Tokenizer(metadata, EXTRAS); init = min(init, time.perf_counter() - t0)
    gc.collect()
    tracemalloc.start()
    try:
        tok = Tokenizer(metadata, EXTRAS)
        tok.encode("warm up the lazily built parts", add_special=False)
        kept = tracemalloc.get_traced_memory()[0]
    finally: tracemalloc.stop()
    return {"init_s": round(init, 4), "kept_mb": round(kept / 1e6, 2)}


def bench_llmbook(path: Path, text: str, repeats: int = 3) -> dict:
    from llmbook.gguf import GGUFFile
    from llmbook.tokenizer import Tokenizer
    from llmbook.tokenizer_extras import EXTRAS
    t0 = time.perf_counter()
    with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f, EXTRAS)
    tok.encode("warm up the lazily built parts", add_special=False)
    load = time.perf_counter() - t0
    with GGUFFile(path) as f: cost = tokenizer_cost(f.metadata)
    cold = warm = float("inf")
    for _ in range(repeats):
        if hasattr(tok, "_word_cache"): tok._word_cache.clear()
        t0 = time.perf_counter(); ids = tok.encode(text, add_special=False); cold = min(cold, time.perf_counter() - t0)
        t0 = time.perf_counter(); tok.encode(text, add_special=False); warm = min(warm, time.perf_counter() - t0)
    return {"n_tokens": len(ids), "load_s": round(load, 3), **cost, "cold_chars_per_s": round(len(text) / cold),
            "warm_chars_per_s": round(len(text) / warm)}


_LLAMA_CPP_SNIPPET = r"""
import json, sys, time, llama_cpp
path, text = sys.argv[1], sys.stdin.read()
llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
vocab = llama_cpp.llama_model_get_vocab(llm.model)
data = text.encode()
buf = (llama_cpp.llama_token * (len(data) + 16))()
best = float("inf")
for _ in range(3):
    t0 = time.perf_counter()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(data) + 16, False, False)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"n_tokens": n, "chars_per_s": round(len(text) / best)}))
"""


def bench_llama_cpp(refpy: str, path: Path, text: str) -> dict:
    r = subprocess.run([refpy, "-c", _LLAMA_CPP_SNIPPET, str(path)], input=text, capture_output=True, text=True)
    if r.returncode != 0: return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2"); ap.add_argument("--gemma3")
    ap.add_argument("--refpy", default=os.environ.get("REFPY"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from conftest import smollm2_file, gemma3_file
    models = {"smollm2": Path(args.smollm2) if args.smollm2 else smollm2_file(),
              "gemma3": Path(args.gemma3) if args.gemma3 else gemma3_file()}
    text = english_text()
    results = {}
    for name, path in models.items():
        if path is None: continue
        res = {"llmbook": bench_llmbook(path, text)}
        if args.refpy: res["llama.cpp"] = bench_llama_cpp(args.refpy, path, text)
        results[name] = res
    if args.json: print(json.dumps(results, indent=1)); return
    print(f"encode {len(text)} chars of English (pydoc_data), add_special=False")
    for name, res in results.items():
        ours = res["llmbook"]
        line = (f"{name:8} llmbook: {ours['cold_chars_per_s'] / 1e6:.2f} M chars/s cold, "
                f"{ours['warm_chars_per_s'] / 1e6:.2f} M warm, {ours['n_tokens']} tokens, load {ours['load_s']:.2f} s "
                f"(Tokenizer(metadata) {1e3 * ours['init_s']:.0f} ms, keeps {ours['kept_mb']:.1f} MB)")
        ref = res.get("llama.cpp")
        if ref and "chars_per_s" in ref:
            line += (f" | llama.cpp: {ref['chars_per_s'] / 1e6:.2f} M chars/s, {ref['n_tokens']} tokens"
                     f"{'' if ref['n_tokens'] == ours['n_tokens'] else ' (COUNT DIFFERS)'}")
        elif ref: line += f" | llama.cpp: {ref['error']}"
        print(line)


if __name__ == "__main__":
    main()
