"""Make tests/fixtures/quantize_llamacpp.json: do llmbook's quantized files load in llama.cpp and continue text as llmbook does?

Run with the project's Python (llmbook installed); llama.cpp work runs in a second Python that has
llama-cpp-python (never a dependency of llmbook), given as --refpy or $REFPY:

    .venv/bin/python tools/make_quantize_fixtures.py --refpy /path/to/python-with-llama_cpp

1. A tiny llama (`tiny_model`: random F32 weights from `write_random_model`, plus a 300-token SentencePiece-style
   vocabulary so that llama.cpp accepts it) is quantized by llmbook to each type. llama.cpp loads every result
   and continues a prompt greedily; llama.cpp also quantizes the same F32 model itself (`llama_model_quantize`),
   and we record its per-tensor types and data hashes, so the test can compare our bytes with llama.cpp's.
2. SmolLM2-135M (Q4_1) is requantized by llmbook to Q8_0 and Q4_0; llama.cpp continues a text prompt
   greedily from each. The file hashes are recorded, so the tests know they check the same files.
"""
import argparse, hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "quantize_llamacpp.json"
TINY = dict(n_layers=8, n_embd=256, n_heads=4, n_kv_heads=2, head_dim=64, n_ff=320, n_vocab=300, seed=7, wtype="F32", tied=False)
# Random layers make a chaotic model whose top-2 logits are often within 0.1 of each other, where llama.cpp's
# 8-bit activations decide the greedy token. A residual stream led by the (exact) embedding, and a larger
# output scale, widen the margins so that a greedy continuation tests the files, not the rounding of ties.
SCALE = {"token_embd.weight": 4.0, "output.weight": 4.0}
TINY_TYPES = ["Q8_0", "Q5_0", "Q4_1", "Q4_0", "Q4_K_M", "F16", "Q5_1", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_S"]
TINY_PROMPT = [1, 300 - 41, 300 - 30, 300 - 12, 300 - 5, 100, 270]
SMOL_TYPES = ["Q8_0", "Q4_0"]
SMOL_PROMPT = "The capital of France is Paris. The capital of Germany is"
N_PREDICT = 16
MEASURE_CTX = 128


def sha256(p) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""): h.update(chunk)
    return h.hexdigest()


def tiny_model(path: Path) -> Path:
    "The tiny llama of TINY with a vocabulary llama.cpp accepts: <unk> <s> </s>, the 256 byte tokens, then words."
    from llmbook.testmodels import write_random_model
    from llmbook.gguf import GGUFFile, GGUFWriter, GGUFValueType
    raw = write_random_model(path.with_name(path.stem + "-novocab.gguf"), **TINY)
    n = TINY["n_vocab"]
    words = [f"\u2581w{i}" for i in range(n - 3 - 256)]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)          # unknown, control, byte, normal
    with GGUFFile(raw) as f:
        w = GGUFWriter(path)
        for k, v in f.metadata.items(): w.add(k, v, f.metadata_types[k])
        w.add("general.file_type", 0, GGUFValueType.UINT32)   # ALL_F32
        w.add("tokenizer.ggml.model", "llama")
        w.add("tokenizer.ggml.tokens", tokens)
        w.add("tokenizer.ggml.scores", [0.0] * 259 + [-float(i) for i in range(len(words))], (GGUFValueType.ARRAY, GGUFValueType.FLOAT32))
        w.add("tokenizer.ggml.token_type", types, (GGUFValueType.ARRAY, GGUFValueType.INT32))
        for k, v in (("bos", 1), ("eos", 2), ("unknown", 0)): w.add(f"tokenizer.ggml.{k}_token_id", v, GGUFValueType.UINT32)
        for name in f.tensors:      # a stronger embedding and output make clear predictions (see SCALE)
            x = f.qtensor(name)
            w.add_tensor(name, f.dequantize(name) * np.float32(SCALE[name]) if name in SCALE else x)
        w.write()
    raw.unlink()
    return path


def llmbook_greedy(path, prompt, n) -> list:
    "Greedy continuation by llmbook: one prefill, then one token at a time through the KV cache."
    from llmbook.loading import load
    m = load(path, n_ctx=len(prompt) + n)
    cache = m.new_cache()
    logits = m.forward(prompt, cache, n_out=1)
    out = []
    for _ in range(n):
        out.append(int(np.argmax(logits[-1])))
        logits = m.forward([out[-1]], cache)
    return out


# ---- the llama.cpp side: runs in REFPY ----
WORKER = r'''
import json, sys, hashlib, ctypes
import numpy as np
import llama_cpp
from llama_cpp import Llama
job = json.loads(sys.stdin.read())
res = {}
if job["kind"] == "greedy":
    llm = Llama(model_path=job["path"], n_ctx=128, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    prompt = job["prompt"] if isinstance(job["prompt"], list) else llm.tokenize(job["prompt"].encode(), add_bos=True, special=False)
    llm.reset(); llm.eval(prompt)
    out, margins = [], []
    for _ in range(job["n"]):
        s = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(s)[::-1][:2]
        out.append(int(top[0])); margins.append(float(s[top[0]] - s[top[1]]))
        llm.eval([out[-1]])
    res = {"prompt": [int(t) for t in prompt], "tokens": out, "margins": margins}
elif job["kind"] == "measure":
    # llama-perplexity's recipe: windows of n_ctx, each on a fresh context, the second half scored
    def logprobs(path, window):
        llm = Llama(model_path=path, n_ctx=len(window), n_batch=len(window), n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
        llm.reset(); llm.eval(window)
        first = len(window) // 2
        x = np.array(llm.scores[first:len(window) - 1], dtype=np.float64)
        x -= x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))
    nll = {p: [] for p in job["paths"]}; kl = {p: [] for p in job["paths"]}; top1 = {p: [] for p in job["paths"]}
    for w in job["windows"]:
        targets = np.array(w[len(w) // 2 + 1:]); rows = np.arange(len(targets))
        ref = None
        for p in job["paths"]:
            q = logprobs(p, w)
            if ref is None: ref = q
            nll[p] += (-q[rows, targets]).tolist()
            kl[p] += np.sum(np.exp(ref) * (ref - q), axis=-1).tolist()
            top1[p] += (q.argmax(-1) == ref.argmax(-1)).tolist()
    res = {p: {"perplexity": float(np.exp(np.mean(nll[p]))), "mean_kl": float(np.mean(kl[p])), "top1": float(np.mean(top1[p])),
               "n_scored": len(nll[p])} for p in job["paths"]}
elif job["kind"] == "quantize":
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype, p.nthread, p.allow_requantize = job["ftype"], 2, True
    rc = llama_cpp.llama_model_quantize(job["src"].encode(), job["dst"].encode(), ctypes.byref(p))
    res = {"rc": int(rc)}
print(json.dumps(res))
'''


def ref(refpy: str, job: dict) -> dict:
    r = subprocess.run([refpy, "-c", WORKER], input=json.dumps(job), capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"llama.cpp worker failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def tensor_table(path) -> dict:
    "name -> [type, sha256 of its bytes], in file order."
    from llmbook.gguf import GGUFFile
    with GGUFFile(path) as f:
        return {n: [t.type, hashlib.sha256(f.qtensor(n).data.tobytes()).hexdigest()] for n, t in f.tensors.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refpy", default=os.environ.get("REFPY"), help="a Python with llama-cpp-python")
    ap.add_argument("--smollm2", type=Path, default=None, help="SmolLM2-135M-Instruct.Q4_1.gguf (default: the installed one)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if not args.refpy: ap.error("give --refpy or set REFPY")
    from llmbook.quantize import quantize_model, file_type
    from llmbook.model import default_model_path
    fx = {"tiny": {"config": TINY, "prompt": TINY_PROMPT, "n_predict": N_PREDICT, "types": {}},
          "smollm2": {"prompt": SMOL_PROMPT, "n_predict": N_PREDICT, "types": {}}}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = tiny_model(d / "tiny-f32.gguf")
        fx["tiny"]["source_sha256"] = sha256(src)
        base = ref(args.refpy, {"kind": "greedy", "path": str(src), "prompt": TINY_PROMPT, "n": N_PREDICT})
        fx["tiny"]["f32_llama_cpp"] = base
        fx["tiny"]["f32_llmbook"] = llmbook_greedy(src, TINY_PROMPT, N_PREDICT)
        for t in TINY_TYPES:
            ours = quantize_model(src, d / f"ours-{t}.gguf", t, progress=False).path
            theirs = d / f"llama-{t}.gguf"
            rc = ref(args.refpy, {"kind": "quantize", "src": str(src), "dst": str(theirs), "ftype": file_type(t).id})["rc"]
            if rc: raise RuntimeError(f"llama_model_quantize({t}) returned {rc}")
            g = ref(args.refpy, {"kind": "greedy", "path": str(ours), "prompt": TINY_PROMPT, "n": N_PREDICT})
            fx["tiny"]["types"][t] = {
                "ours_sha256": sha256(ours), "ours_bytes": ours.stat().st_size,
                "llama_cpp_file_sha256": sha256(theirs), "llama_cpp_tensors": tensor_table(theirs),
                "llama_cpp_on_ours": g["tokens"], "llama_cpp_margins": g["margins"],
                "llmbook_on_ours": llmbook_greedy(ours, TINY_PROMPT, N_PREDICT)}
            print(t, "llama.cpp:", g["tokens"], "\n     llmbook:  ", fx["tiny"]["types"][t]["llmbook_on_ours"], file=sys.stderr)
        smol = args.smollm2 or default_model_path()
        fx["smollm2"]["source_sha256"] = sha256(smol)
        for t in SMOL_TYPES:
            ours = quantize_model(smol, d / f"smol-{t}.gguf", t, progress=False).path
            g = ref(args.refpy, {"kind": "greedy", "path": str(ours), "prompt": SMOL_PROMPT, "n": N_PREDICT})
            mine = llmbook_greedy(ours, g["prompt"], N_PREDICT)
            fx["smollm2"]["types"][t] = {"ours_sha256": sha256(ours), "prompt_ids": g["prompt"],
                                         "llama_cpp_on_ours": g["tokens"], "llama_cpp_margins": g["margins"],
                                         "llmbook_on_ours": mine}
            print("SmolLM2", t, "llama.cpp:", g["tokens"], "\n     llmbook:  ", mine, file=sys.stderr)
        # llama.cpp measures the Q4_0 file against the original on chapter 21's sample text
        from llmbook.quantize import SAMPLE_TEXT, evaluation_windows
        from llmbook.tokenizer import Tokenizer
        from llmbook.gguf import GGUFFile
        with GGUFFile(smol) as f: tok = Tokenizer.from_gguf(f)
        windows = evaluation_windows(tok.encode(SAMPLE_TEXT), MEASURE_CTX, tok.bos if tok.add_bos else None)
        m = ref(args.refpy, {"kind": "measure", "paths": [str(smol), str(d / "smol-Q4_0.gguf")], "windows": windows})
        fx["smollm2"]["measure"] = {"ctx": MEASURE_CTX, "windows": windows, "original": m[str(smol)], "Q4_0": m[str(d / "smol-Q4_0.gguf")]}
        print("llama.cpp measures:", fx["smollm2"]["measure"]["original"], fx["smollm2"]["measure"]["Q4_0"], file=sys.stderr)
    args.out.write_text(json.dumps(fx, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
