"""Make tests/fixtures/llamacpp_batch_spread.json: how much llama.cpp's logits move with the way a prompt is batched.

Run with a Python that has llama-cpp-python (never a dependency of llmbook):

    $REFPY tools/make_batch_spread_fixture.py --smollm2 PATH.gguf --gemma3 PATH.gguf

For each model, the same real text (the long prompt of make_logit_fixtures.py) is run through llama.cpp as one
batch, one token at a time, in chunks of 7 and in chunks of 64 (logits at every position each time). Against the
one batch, per mode: the KL divergence of the softmax at each position (mean and max), how often the top token
agrees, and the largest |difference| of the last position's logits. Chapter 16 prints these next to llmbook's own
numbers (bit-identical), and tests that compare llmbook with llama.cpp take their tolerances from them.
"""
import argparse, json, platform
from pathlib import Path
import numpy as np
import llama_cpp
from llama_cpp import Llama
from make_logit_fixtures import LONG

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "llamacpp_batch_spread.json"

def cpu_name() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"): return line.split(":", 1)[1].strip()
    return platform.processor()

def cpu_flags() -> list:
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni") if f in have]
    return []

def log_softmax(x):
    x = x.astype(np.float64); x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))

def run(llm, ids, chunk):
    "Logits at every position, the prompt fed in pieces of `chunk` tokens (0: one batch)."
    llm.reset()
    if chunk == 0: llm.eval(ids)
    else:
        for i in range(0, len(ids), chunk): llm.eval(ids[i:i + chunk])
    return np.array(llm.scores[:len(ids)], dtype=np.float32)

def spread(path, n_tokens):
    llm = Llama(model_path=str(path), n_ctx=1024, n_batch=1024, n_ubatch=1024, n_threads=2, n_threads_batch=2,
                logits_all=True, verbose=False)
    ids = llm.tokenize(LONG.encode("utf-8"), add_bos=True, special=False)[:n_tokens]
    ref = run(llm, ids, 0)
    lp_ref = log_softmax(ref)
    modes = {}
    for name, chunk in (("one token at a time", 1), ("chunks of 7", 7), ("chunks of 64", 64)):
        got = run(llm, ids, chunk)
        lp = log_softmax(got)
        kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(-1)
        modes[name] = {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()),
                       "top1_agree": float((got.argmax(-1) == ref.argmax(-1)).mean()),
                       "last_max_abs_diff": float(np.abs(got[-1] - ref[-1]).max()),
                       "bit_identical_positions": int((got == ref).all(-1).sum())}
    return {"n_tokens": len(ids), "modes": modes}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", required=True); ap.add_argument("--gemma3", required=True)
    ap.add_argument("--n-tokens", type=int, default=600)
    a = ap.parse_args()
    out = {"llama_cpp_python": llama_cpp.__version__, "cpu": cpu_name(), "cpu_flags": cpu_flags(), "threads": 2,
           "text": "make_logit_fixtures.LONG", "models": {}}
    for name, path in (("smollm2", a.smollm2), ("gemma3", a.gemma3)):
        out["models"][name] = spread(path, a.n_tokens)
        print(name, json.dumps(out["models"][name], indent=1))
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", OUT)

if __name__ == "__main__":
    main()
