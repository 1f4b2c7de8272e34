"""Make tests/fixtures/family_<case>_<wtype>.json: llama.cpp's logits on small random-weight files of each model
family of issue 15 (llama, llama with a sliding-window key, qwen2, qwen3, phi3 with and without LongRoPE, gemma2)
and of issue 28 (mixtures of experts: qwen3moe, mixtral (a llama file with experts), olmoe, gpt-oss).

Run with a Python that has llama-cpp-python (never a dependency of llmbook):

    /work/refvenv/bin/python tools/make_family_fixtures.py [--only CASE ...] [--check-twice] [--sensitivity]

The GGUF files are written by tools/family_models.py with llmbook's GGUFWriter and quantizers. llmbook needs
numba, which the llama.cpp Python usually lacks, so the files are written by a second Python (--llmbook-python,
default $LLMBOOK_PY or the repository's .venv/bin/python) into a temporary directory, then loaded here.

Each fixture holds:
- `writer`: the keyword arguments of `family_models.write_family_model(path, **writer)`, which rebuilds the
  identical file (`model_sha256` says which bytes llama.cpp ran);
- `prompt`: 24 token ids (BOS first), longer than the 8-token sliding windows of the windowed cases;
- `continuation`: llama.cpp's 16 greedy tokens after the prompt, decoded one at a time through the KV cache, with
  `margins`, llama.cpp's top-1 minus top-2 logit at each step (small margins are near-ties);
- `logits_f16`: llama.cpp's logits at every position of `prompt + continuation` (40 x n_vocab, float16,
  base64, row-major); the prompt rows come from one batched eval, the rest from single-token evals.
  `argmax` and `top2_margin` give the exact float32 top-2 facts for every row.
llama.cpp's settings: n_ctx 256 (so n_ctx_seq 256, which decides phi3's long/short RoPE factors), n_threads 2,
flash attention off, F16 KV cache, logits_all.

Also tests/fixtures/family_iq4_ggml.json: ggml's own IQ4_NL/IQ4_XS dequantizers and reference quantizers on
seeded random input (ctypes into llama-cpp-python's libggml-base.so), the bit-exact target for a dequantizer.
`--sensitivity` prints how far llama.cpp's logits move when one feature is changed (window, softcaps, biases,
LongRoPE factor choice, attn_factor): how strongly each fixture pins each feature down.
The spec behind all this: /work/notes/families.md.
"""
import argparse, base64, hashlib, importlib.util, json, os, subprocess, sys, tempfile
from pathlib import Path
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "tests" / "fixtures"
SEED = 15
N_CTX, N_THREADS, N_PREDICT = 256, 2, 16
PROMPT = [1] + np.random.default_rng(SEED).integers(3, 512, 23).tolist()

# Shapes that K-quants accept (rows of 256: n_embd, n_heads * head_dim and n_ff are multiples of 256).
BASE = dict(n_layers=2, n_embd=256, n_heads=4, n_kv_heads=2, n_ff=512, n_vocab=512, seed=SEED)
CASES = {
    # plain llama: untied output, normal (GPT-J) RoPE pairing
    "llama": dict(arch="llama"),
    # Mistral-style key on a llama file: llama.cpp's llama arch never reads it (full attention everywhere)
    "llama_swa": dict(arch="llama", sliding_window=8),
    # Qwen2.5-0.5B-like: QKV biases, NeoX RoPE, tied output, rope base 1e6
    "qwen2": dict(arch="qwen2"),
    # Qwen2.5-7B-like: untied output
    "qwen2_untied": dict(arch="qwen2", tied=False),
    # Qwen3-0.6B-like: per-head q/k RMSNorm, key_length 128 with n_embd 256 / 4 heads (head_dim != n_embd/n_heads)
    "qwen3": dict(arch="qwen3", head_dim=128),
    # Phi-3-mini-4k-like: fused attn_qkv and ffn_up [gate; up], NeoX, no RoPE factors; sliding_window 8 written
    # as the converter writes Phi-3's 2047, which llama.cpp disables (full attention)
    "phi3": dict(arch="phi3", sliding_window=8),
    # Phi-3.5-mini-like LongRoPE: factors present, original context 4096 >= n_ctx_seq 256 -> short factors;
    # rope.scaling.attn_factor 1.19 (the converter's formula) scales cos/sin all the same
    "phi3_rope_short": dict(arch="phi3", n_ctx_train=131072, original_context_length=4096, rope_factors=True),
    # Phi-4-mini-like: tied, partial rotary (rope.dimension_count 48 of head_dim 64), original context 128 <
    # n_ctx_seq 256 -> long factors
    "phi3_rope_long": dict(arch="phi3", n_ctx_train=512, original_context_length=128, rope_factors=True,
                           rope_dim=48, tied=True),
    # Gemma-2-like: sqrt(n_embd) embedding scale, post norms, GELU(tanh), head_dim 128 != n_embd/n_heads,
    # window 8 on layer 0 (even layers slide), attention softcap 5 and final softcap 10 (small, so that they bite),
    # Q and K weights 1.5x (sharper attention, so the attention softcap matters)
    "gemma2": dict(arch="gemma2", head_dim=128, sliding_window=8, attn_softcap=5.0, final_softcap=10.0, qk_gain=1.5),
    # Qwen3-30B-A3B-like (issue 28): qwen3's attention, then a mixture of 16 experts of 256, 4 chosen per token
    # (softmax over all 16, top 4, renormalized), untied output; the router stays F32
    "qwen3moe": dict(arch="qwen3moe", head_dim=128, n_expert=16, n_expert_used=4, n_ff_exp=256, tied=False),
    # Mixtral-like: a llama file with llama.expert_count 8, 2 used, experts of feed_forward_length 256
    "mixtral": dict(arch="llama", moe=True, n_expert=8, n_expert_used=2, n_ff=256),
    # Qwen3 with YaRN (issue 28: any family declaring rope.scaling.type yarn): factor 4 over an original context of
    # 256 (as Qwen3's 131072 over 32768), so that the low frequencies are interpolated and cos/sin scaled
    "qwen3_yarn": dict(arch="qwen3", head_dim=128, n_ctx_train=1024, rope_yarn=[4.0, 256]),
    # OLMoE-1B-7B-like: llama's block with one RMSNorm over all of q and one over all of k (n_embd long: no GQA),
    # NeoX RoPE, 16 experts of feed_forward_length 256, 4 used, weights not renormalized
    "olmoe": dict(arch="olmoe", n_kv_heads=4, n_expert=16, n_expert_used=4, n_ff=256),
    # gpt-oss-20b-like: biased q/k/v/o, a sink logit per head, window 8 on even layers (gpt-oss: 128), YaRN factor 32
    # over 4096 (rope base 150000), 8 experts of 256 with biases, 2 used, top-2 logits softmaxed, swiglu_oai; gate/up
    # weights 2x (some values beyond the clamp at 7); also in MXFP4 (experts MXFP4, other matrices Q8_0)
    "gptoss": dict(arch="gpt-oss", n_expert=8, n_expert_used=2, n_ff=256, sliding_window=8, rope_yarn=[32.0, 4096],
                   n_ctx_train=131072, rope_base=150000.0, norm_eps=1e-5, expert_gain=2.0),
    # the same with a router of 8x the spread (issue 37): no position's 2nd and 3rd router logits within 0.1 in any
    # layer, so no rounding can flip an expert and every position must match llama.cpp's, whichever kernels run
    "gptoss_routed": dict(arch="gpt-oss", n_expert=8, n_expert_used=2, n_ff=256, sliding_window=8, rope_yarn=[32.0, 4096],
                          n_ctx_train=131072, rope_base=150000.0, norm_eps=1e-5, expert_gain=2.0, router_gain=16.0),
}
WTYPES = ("F16", "Q4_K_M")
EXTRA_ONLY = {"gptoss_routed"}     # cases made only in their EXTRA weight types
EXTRA = [("llama", "IQ4_NL"), ("llama", "IQ4_XS"), ("qwen2", "IQ4_NL"), ("gptoss", "MXFP4"), ("gptoss_routed", "MXFP4")]
ABOUT = {
    "llama": "plain llama (untied, normal RoPE): the baseline llmbook already runs",
    "llama_swa": "llama.attention.sliding_window = 8 on a llama file: llama.cpp ignores it (llama arch has no SWA); "
                 "llmbook must not apply a window either to match",
    "qwen2": "qwen2: attn_q/k/v biases, NeoX RoPE, tied output (no output.weight), rope base 1e6",
    "qwen2_untied": "qwen2 with output.weight",
    "qwen3": "qwen3: attn_q_norm/attn_k_norm (RMSNorm per head, before RoPE), key_length 128 with n_embd 256 and 4 heads, NeoX",
    "phi3": "phi3: fused attn_qkv, ffn_up = [gate; up] (2*n_ff rows), NeoX, Q scaled before QK; "
            "phi3.attention.sliding_window = 8 is present but llama.cpp disables Phi SWA",
    "phi3_rope_short": "phi3 LongRoPE: rope_factors_short chosen because n_ctx_seq 256 <= original_context_length 4096; "
                       "rope.scaling.attn_factor multiplies cos and sin",
    "phi3_rope_long": "phi3 LongRoPE: rope_factors_long chosen because n_ctx_seq 256 > original_context_length 128; "
                      "partial rotary (48 of 64 dims), tied output",
    "gemma2": "gemma2: embedding * sqrt(n_embd), post_attention_norm/post_ffw_norm, GELU-tanh GeGLU, Q * 1/sqrt(head_dim), "
              "attention logits 5*tanh(s/5), final logits 10*tanh(l/10), layer 0 sliding window 8 (even layers), tied",
    "qwen3moe": "qwen3moe: qwen3's attention (q/k norms, NeoX, key_length 128), FFN a mixture of 16 experts (3-D "
                "ffn_gate_exps/ffn_up_exps/ffn_down_exps of 256 rows each), router ffn_gate_inp F32, softmax over all "
                "experts, top 4, weights renormalized to sum 1 (norm_topk_prob), untied output",
    "qwen3_yarn": "qwen3 with rope.scaling.type yarn, factor 4, original_context_length 256 (context_length 1024): "
                  "YaRN's per-frequency ramp between extrapolation and interpolation and its scale on cos and sin",
    "olmoe": "olmoe: attn_q_norm/attn_k_norm of n_embd (RMSNorm over the whole q and k rows, before the split into "
             "heads), NeoX RoPE, 4 heads = 4 KV heads, ffn_gate_inp (F32) and 16 experts of feed_forward_length 256, softmax "
             "over all 16, top 4, not renormalized, untied output",
    "gptoss": "gpt-oss: attn_q/k/v/output biases, attn_sinks (one logit per head in the softmax), sliding window 8 on "
              "even layers, NeoX RoPE with YaRN (factor 32, original context 4096, base 150000), post_attention_norm as "
              "the FFN norm, ffn_gate_inp with bias, 8 experts of 256 with biases, 2 used (top-2 logits, softmax over "
              "them), swiglu_oai (alpha 1.702, limit 7), untied output",
    "gptoss_routed": "gpt-oss as `gptoss`, MXFP4 experts, with a router of 8x the spread (router_gain 16): no router "
                     "near-ties, so every position is compared",
    "mixtral": "mixtral: a llama file (normal RoPE, untied) with llama.expert_count 8 and expert_used_count 2: "
               "ffn_gate_inp (F32) and ffn_gate_exps/ffn_up_exps/ffn_down_exps of feed_forward_length 256, softmax "
               "over all 8, top 2, renormalized",
}


def b64(a) -> str: return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def sha256(p) -> str: return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def writer_args(case: str, wtype: str) -> dict:
    return {**BASE, **CASES[case], "wtype": wtype}


def write_model(path: Path, args: dict, llmbook_python: str) -> Path:
    "Write the GGUF: in this process if llmbook imports here, else with the llmbook Python."
    kw = dict(args); arch = kw.pop("arch")
    if importlib.util.find_spec("numba") is not None:
        sys.path.insert(0, str(HERE))
        from family_models import write_family_model
        return write_family_model(path, arch, **kw)
    r = subprocess.run([llmbook_python, str(HERE / "family_models.py"), str(path), arch, json.dumps(kw)],
                       capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"writing {path.name} failed:\n{r.stderr[-3000:]}")
    return path


def run_llama_cpp(path: Path, prompt=PROMPT, n_predict=N_PREDICT) -> dict:
    from llama_cpp import Llama
    llm = Llama(model_path=str(path), n_ctx=N_CTX, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                logits_all=True, seed=0, flash_attn=False, verbose=False)
    llm.reset(); llm.eval(prompt)
    cont, margins = [], []
    for _ in range(n_predict):
        s = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        o = np.argsort(-s, kind="stable")[:2]
        cont.append(int(o[0])); margins.append(float(s[o[0]] - s[o[1]]))
        llm.eval([cont[-1]])
    logits = np.array(llm.scores[:llm.n_tokens], dtype=np.float32)
    n_vocab = int(llm.n_vocab())
    del llm
    return {"continuation": cont, "margins": margins, "logits": logits, "n_vocab": n_vocab}


def tensor_types(path) -> dict:
    "name -> GGML type name, read with gguf-py (present next to llama-cpp-python) or llmbook."
    try:
        from gguf import GGUFReader
        return {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}
    except ImportError:
        from llmbook.gguf import GGUFFile
        with GGUFFile(path) as f: return {n: t.type for n, t in f.tensors.items()}


def fixture(case: str, wtype: str, path: Path, r: dict) -> dict:
    import llama_cpp
    lg = r["logits"]
    top2 = np.sort(lg, -1)[:, -2:]
    return {
        "about": ABOUT[case] + ". Made by tools/make_family_fixtures.py; rebuild the file with "
                 "tools/family_models.write_family_model(path, **writer) and check model_sha256.",
        "case": case, "wtype": wtype, "writer": writer_args(case, wtype),
        "model_sha256": sha256(path), "model_bytes": path.stat().st_size, "tensor_types": tensor_types(path),
        "llama_cpp": {"llama_cpp_python": llama_cpp.__version__, "n_ctx": N_CTX, "n_threads": N_THREADS,
                      "flash_attn": False, "kv_cache": "f16", "logits_all": True},
        "prompt": [int(t) for t in PROMPT], "continuation": r["continuation"],
        "margins": [round(m, 5) for m in r["margins"]],
        "n_vocab": r["n_vocab"], "n_positions": int(lg.shape[0]),
        "argmax": lg.argmax(-1).tolist(), "top2_margin": [round(float(m), 5) for m in top2[:, 1] - top2[:, 0]],
        "logits_f16": b64(lg.astype(np.float16)),
    }


def iq4_fixture() -> dict:
    """ggml's own IQ4_NL / IQ4_XS dequantizers (and reference quantizers) on seeded random input, called through
    ctypes from the libggml-base.so that llama-cpp-python ships: the bit-exact target for llmbook's dequantizer."""
    import ctypes, llama_cpp
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    rng = np.random.default_rng(SEED)
    out = {"about": "ggml's dequantize_row_iq4_nl/_xs on random blocks and quantize_row_iq4_nl/_xs_ref on random "
                    "floats (libggml-base.so of llama-cpp-python, see tools/make_family_fixtures.py). Blocks: IQ4_NL "
                    "= f16 d + 16 bytes (byte j: value j in the low nibble, value j+16 in the high one), "
                    "IQ4_XS = f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles per 256 values.",
           "llama_cpp_python": llama_cpp.__version__}
    for name, bs, size, n_blocks in (("iq4_nl", 32, 18, 64), ("iq4_xs", 256, 136, 16)):
        raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
        d = (rng.standard_normal(n_blocks) * 0.02).astype(np.float16)   # finite scales (random bytes could be NaN)
        d[:2] = [0.0, -0.0]
        raw[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
        y = np.zeros(n_blocks * bs, np.float32)
        f = getattr(lib, f"dequantize_row_{name}")
        f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
        f(raw.ctypes.data, y.ctypes.data, y.size)
        x = (rng.standard_normal(n_blocks * bs) * rng.choice([1e-3, 1.0, 30.0], n_blocks * bs // bs).repeat(bs)).astype(np.float32)
        x[:bs] = 0.0                                                        # an all-zero block
        q = np.zeros(n_blocks * size, np.uint8)
        g = getattr(lib, f"quantize_row_{name}_ref")
        g.argtypes, g.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
        g(x.ctypes.data, q.ctypes.data, x.size)
        out[name] = {"block_values": bs, "block_bytes": size, "n_blocks": n_blocks,
                     "dequantize": {"blocks": b64(raw), "values_f32": b64(y)},
                     "quantize_ref": {"values_f32": b64(x), "blocks": b64(q)}}
    return out


def mxfp4_fixture() -> dict:
    """ggml's own dequantize_row_mxfp4 (libggml-base.so of llama-cpp-python, through ctypes) on random blocks, every
    exponent byte 0..255 among them (0 and 1 make subnormal scales): the bit-exact target for llmbook's dequantizer."""
    import ctypes, llama_cpp
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    rng = np.random.default_rng(SEED)
    n_blocks = 512
    raw = rng.integers(0, 256, (n_blocks, 17), dtype=np.uint8)
    raw[:256, 0] = np.arange(256)                                   # every scale exponent once
    y = np.zeros(n_blocks * 32, np.float32)
    f = lib.dequantize_row_mxfp4
    f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    f(raw.ctypes.data, y.ctypes.data, y.size)
    return {"about": "ggml's dequantize_row_mxfp4 on random MXFP4 blocks (1 byte E8M0 exponent, 16 bytes of E2M1 "
                     "nibbles: byte j holds value j low, value j+16 high), the first 256 with every exponent 0..255. "
                     "Made by tools/make_family_fixtures.py --only mxfp4.",
            "llama_cpp_python": llama_cpp.__version__, "block_values": 32, "block_bytes": 17, "n_blocks": n_blocks,
            "blocks": b64(raw), "values_f32": b64(y)}


def all_jobs(only=None):
    jobs = [(c, t) for c in CASES if c not in EXTRA_ONLY for t in WTYPES] + EXTRA
    return [j for j in jobs if not only or j[0] in only or f"{j[0]}_{j[1]}" in only]


def sensitivity(llmbook_python: str, d: Path):
    "Would a fixture catch an engine that drops a feature? llama.cpp's own logits with and without it (F16)."
    def logits(case, **over):
        p = d / f"sens-{case}-{abs(hash(json.dumps(over, sort_keys=True)))}.gguf"
        write_model(p, {**writer_args(case, "F16"), **over}, llmbook_python)
        return run_llama_cpp(p)["logits"][:len(PROMPT)]     # the continuations may differ: prompt rows only
    def cos(a, b):
        a, b = a.astype(np.float64), b.astype(np.float64)
        return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    rows = [("llama_swa", "llama.attention.sliding_window removed", {"sliding_window": None}),
            ("phi3", "phi3.attention.sliding_window 0 instead of 8", {"sliding_window": 0}),
            ("qwen2", "QKV biases removed (other weights unchanged)", {"qkv_bias": False}),
            ("gemma2", "window 4096 instead of 8", {"sliding_window": 4096}),
            ("gemma2", "attention softcap 1e9 instead of 5", {"attn_softcap": 1e9}),
            ("gemma2", "final softcap 1e9 instead of 10", {"final_softcap": 1e9}),
            ("phi3_rope_long", "original_context_length 4096 (short factors) instead of 128", {"original_context_length": 4096, "rope_attn_factor": None}),
            ("phi3_rope_short", "rope.scaling.attn_factor 1.0 instead of 1.19", {"rope_attn_factor": 1.0}),
            ("phi3_rope_short", "original_context_length 128 (long factors) instead of 4096", {"original_context_length": 128, "rope_attn_factor": 1.1902380714238083})]
    for case, what, over in rows:
        vs = over.pop("_vs", {})
        base, alt = logits(case, **vs), logits(case, **over)
        c = cos(base, alt)
        print(f"{case:16s} {what:62s} cos min {c.min():.5f} median {np.median(c):.5f}  rows 0-7 min {c[:8].min():.5f}  "
              f"argmax differs at {int((base.argmax(-1) != alt.argmax(-1)).sum())}/{len(c)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="cases (e.g. qwen2), case_wtype (e.g. qwen2_F16), iq4 (family_iq4_ggml.json) "
                                          "or mxfp4 (family_mxfp4_ggml.json)")
    ap.add_argument("--out", type=Path, default=OUT, help="directory for the fixtures")
    ap.add_argument("--llmbook-python", default=os.environ.get("LLMBOOK_PY", str(ROOT / ".venv" / "bin" / "python")))
    ap.add_argument("--check-twice", action="store_true", help="write every model and run llama.cpp twice: identical bytes?")
    ap.add_argument("--sensitivity", action="store_true", help="only print how much each feature moves llama.cpp's logits")
    ap.add_argument("--keep", type=Path, help="keep the GGUF files in this directory")
    args = ap.parse_args()
    if importlib.util.find_spec("llama_cpp") is None: sys.exit("run with a Python that has llama-cpp-python")
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        if args.sensitivity: return sensitivity(args.llmbook_python, d)
        args.out.mkdir(parents=True, exist_ok=True)
        if not args.only or "iq4" in args.only:
            text = json.dumps(iq4_fixture(), indent=1) + "\n"
            if args.check_twice and json.dumps(iq4_fixture(), indent=1) + "\n" != text: sys.exit("iq4: not deterministic")
            (args.out / "family_iq4_ggml.json").write_text(text)
            print(f"family_iq4_ggml.json {len(text) / 1e3:.1f} kB", file=sys.stderr)
        if args.only and "mxfp4" in args.only:
            text = json.dumps(mxfp4_fixture(), indent=1) + "\n"
            (args.out / "family_mxfp4_ggml.json").write_text(text)
            print(f"family_mxfp4_ggml.json {len(text) / 1e3:.1f} kB", file=sys.stderr)
        for case, wtype in all_jobs(args.only):
            path = write_model(d / f"family_{case}_{wtype}.gguf", writer_args(case, wtype), args.llmbook_python)
            fx = fixture(case, wtype, path, run_llama_cpp(path))
            text = json.dumps(fx, indent=1) + "\n"
            if args.check_twice:
                again = write_model(d / f"again_{case}_{wtype}.gguf", writer_args(case, wtype), args.llmbook_python)
                same_file = sha256(again) == fx["model_sha256"]
                same_run = json.dumps(fixture(case, wtype, again, run_llama_cpp(again)), indent=1) + "\n" == text
                print(f"  twice: same GGUF bytes {same_file}, same fixture bytes {same_run}", file=sys.stderr)
                if not (same_file and same_run): sys.exit(f"{case} {wtype}: not deterministic")
            out = args.out / f"family_{case}_{wtype}.json"
            out.write_text(text)
            m = np.array(fx["margins"])
            print(f"{out.name:34s} {out.stat().st_size / 1e3:6.1f} kB  model {fx['model_bytes'] / 1e6:.2f} MB  "
                  f"cont {fx['continuation'][:6]}... ({len(set(fx['continuation']))} distinct)  "
                  f"min margin {m.min():.3f}, {int((m < 0.1).sum())} < 0.1", file=sys.stderr)


if __name__ == "__main__":
    main()
