"""Measure llmbook's numba kernels: matrix x vector GMAC/s and GB/s per weight type and shape, a decode-step
estimate for SmolLM2-135M's shapes and a prefill estimate (64 tokens), on random weights.

    python bench/bench_kernels.py [--threads N] [--json] [--quick] [--model PATH]

With --model, also times matvec on every distinct (type, shape) of a real GGUF file and reports the packed
size of all its matrices against their bytes in the file (per type and in total).
The machine may be shared: each number is the best of several runs, and it is worth running twice.
"""
import argparse, json, sys, time
import numba
import numpy as np
from llmbook import packed as P, runtime as R
from llmbook import attention_kernels as A
from numba import njit

# The decode-step estimate's RoPE and residual add: two small kernels of its own (the engine fuses both into others)
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


SMOLLM2 = dict(n_embd=576, n_ff=1536, n_heads=9, n_kv_heads=3, n_layers=30, n_vocab=49152)


def best_time(fn, min_seconds=0.2, repeat=5):
    "Best seconds per call over `repeat` runs of enough calls to last ~min_seconds/repeat each."
    fn()
    t0 = time.perf_counter(); fn(); once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(min_seconds / repeat / once))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number): fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def bench_matvec(types, shapes, min_seconds):
    rows = []
    for name in types:
        for shape in shapes:
            if shape[1] % (256 if name in ("Q4_K", "Q5_K", "Q6_K") else 32): continue
            qt = P.random_qtensor(name, shape, seed=0)
            w = P.pack(qt)
            x = np.random.default_rng(1).standard_normal(shape[1]).astype(np.float32)
            out = np.empty(shape[0], np.float32)
            s = best_time(lambda: w.matvec(x, out), min_seconds)
            rows.append(dict(type=name, shape=list(shape), us=s * 1e6, gmac_per_s=qt.size / s / 1e9,
                             gb_per_s=w.nbytes / s / 1e9, file_bytes=qt.nbytes, packed_bytes=w.nbytes))
    return rows


def decode_step_estimate(n_embd=576, n_ff=1536, n_heads=9, n_kv_heads=3, n_layers=30, n_vocab=49152,
                         weight_type="Q4_1", head_type="Q8_0", n_past=64, repeat=5) -> dict:
    "Time the kernels of one decode step on random weights of a llama-shaped model: ms per token and MACs."
    hd = n_embd // n_heads
    qkv = P.pack(P.random_qtensor(weight_type, (n_embd + 2 * n_kv_heads * hd, n_embd), 1))
    wo = P.pack(P.random_qtensor(weight_type, (n_embd, n_embd), 2))
    gate_up = P.pack(P.random_qtensor(weight_type, (2 * n_ff, n_embd), 3))
    down = P.pack(P.random_qtensor(weight_type, (n_embd, n_ff), 4))
    head = P.pack(P.random_qtensor(head_type, (n_vocab, n_embd), 5))
    rng = np.random.default_rng(0)
    norm_w = np.ones(n_embd, np.float32)
    Kc = rng.standard_normal((1, n_kv_heads, n_past + 1, hd)).astype(np.float32)
    Vc = rng.standard_normal((1, n_kv_heads, n_past + 1, hd)).astype(np.float32)
    cos = np.ones((n_past + 1, hd // 2), np.float32); sin = np.zeros((n_past + 1, hd // 2), np.float32)
    x = rng.standard_normal((1, n_embd)).astype(np.float32)
    xn, att = np.empty_like(x), np.empty((1, n_heads, hd), np.float32)
    qkv_out, proj = np.empty(qkv.n_rows, np.float32), np.empty((1, n_embd), np.float32)
    gu, act, logits = np.empty((1, 2 * n_ff), np.float32), np.empty((1, n_ff), np.float32), np.empty(n_vocab, np.float32)
    q = qkv_out[: n_embd].reshape(1, n_heads, hd)
    k = qkv_out[n_embd: n_embd + n_kv_heads * hd].reshape(1, n_kv_heads, hd)

    def layer():
        A.rmsnorm(x, norm_w, 1e-5, xn)
        qkv.matvec(xn[0], qkv_out)
        rope(q, n_past, cos, sin, False); rope(k, n_past, cos, sin, False)
        A.tiled_attention(q, Kc, Vc, 0, n_past, 0.125, 0, att)
        wo.matvec(att.reshape(-1), proj[0])
        A.add_rmsnorm(x, proj, norm_w, 1e-5, xn)
        gate_up.matvec(xn[0], gu[0])
        A.swiglu_stacked(gu, act)
        down.matvec(act[0], proj[0])
        add(x, proj)

    def step():
        for _ in range(n_layers): layer()
        A.rmsnorm(x, norm_w, 1e-5, xn)
        head.matvec(xn[0], logits)

    t_layer = best_time(layer, 0, repeat)
    t_head = best_time(lambda: head.matvec(xn[0], logits), 0, repeat)
    t_step = best_time(step, 0, repeat)
    macs = n_layers * (qkv.n_rows + wo.n_rows + gate_up.n_rows) * n_embd + n_layers * down.n_rows * n_ff + n_vocab * n_embd
    return dict(ms_per_token=t_step * 1e3, ms_per_layer=t_layer * 1e3, ms_head=t_head * 1e3,
                tokens_per_s=1 / t_step, gmacs=macs / 1e9, gmac_per_s=macs / t_step / 1e9, threads=numba.get_num_threads(),
                threading_layer=R.threading_layer())


def bench_prefill(n_tokens=64, n_embd=576, n_ff=1536, n_heads=9, n_kv_heads=3, n_layers=30, n_vocab=49152,
                  weight_type="Q4_1", head_type="Q8_0", blas=False, repeat=3):
    """Time the matrix products of a prefill of n_tokens (all logits): ms and tokens/s, with the fused tiles of
    `PackedMatrix.matmul`, or (`blas=True`) each matrix dequantized whole by its rows kernel and multiplied by BLAS."""
    hd = n_embd // n_heads
    mats = [P.pack(P.random_qtensor(weight_type, s, i)) for i, s in enumerate(
        [(n_embd + 2 * n_kv_heads * hd, n_embd), (n_embd, n_embd), (2 * n_ff, n_embd), (n_embd, n_ff)])]
    head = P.pack(P.random_qtensor(head_type, (n_vocab, n_embd), 9))
    dense = np.empty(max(m.n_rows * m.n_cols for m in mats + [head]), np.float32) if blas else None
    X = {n: np.random.default_rng(0).standard_normal((n_tokens, n)).astype(np.float32) for n in (n_embd, n_ff)}
    outs = [np.empty((n_tokens, m.n_rows), np.float32) for m in mats]
    logits = np.empty((n_tokens, n_vocab), np.float32)

    def product(m, x, o):
        if not blas: return m.matmul(x, o)
        w = m.rows(np.arange(m.n_rows), dense[: m.n_rows * m.n_cols].reshape(m.n_rows, m.n_cols))
        np.matmul(x, w.T, out=o)

    def run():
        for _ in range(n_layers):
            for m, o in zip(mats, outs): product(m, X[m.n_cols], o)
        product(head, X[n_embd], logits)
    s = best_time(run, 0, repeat)
    macs = n_tokens * (n_layers * sum(m.n_rows * m.n_cols for m in mats) + n_vocab * n_embd)
    return dict(blas=blas, n_tokens=n_tokens, ms=s * 1e3, tokens_per_s=n_tokens / s, gmac_per_s=macs / s / 1e9)


def model_memory(path):
    "Packed bytes of every 2-D tensor of a GGUF file against its bytes in the file, in total and per type."
    from gguf import GGUFReader
    from llmbook.tensors import QTensor, GGMLType
    per_type = {}
    for t in GGUFReader(path).tensors:
        if len(t.shape) != 2: continue
        shape = tuple(int(s) for s in t.shape[::-1])
        qt = QTensor(np.ascontiguousarray(t.data).reshape(-1).view(np.uint8), int(t.tensor_type), shape)
        f, p = per_type.get(qt.type.name, (0, 0))
        per_type[qt.type.name] = (f + qt.nbytes, p + P.pack(qt).nbytes)
    file_bytes, packed_bytes = (sum(v[i] for v in per_type.values()) for i in (0, 1))
    return dict(file_bytes=file_bytes, packed_bytes=packed_bytes, ratio=packed_bytes / file_bytes,
                per_type={k: dict(file_bytes=f, packed_bytes=p, ratio=p / f) for k, (f, p) in per_type.items()})


def bench_model(path, min_seconds):
    from gguf import GGUFReader
    from llmbook.tensors import QTensor, GGMLType
    seen, rows = set(), []
    for t in GGUFReader(path).tensors:
        if len(t.shape) != 2: continue
        shape = tuple(int(s) for s in t.shape[::-1])
        if (int(t.tensor_type), shape) in seen: continue
        seen.add((int(t.tensor_type), shape))
        qt = QTensor(np.ascontiguousarray(t.data).reshape(-1).view(np.uint8), int(t.tensor_type), shape)
        w = P.pack(qt)
        x = np.random.default_rng(1).standard_normal(shape[1]).astype(np.float32)
        out = np.empty(shape[0], np.float32)
        s = best_time(lambda: w.matvec(x, out), min_seconds)
        rows.append(dict(tensor=t.name, type=GGMLType(int(t.tensor_type)).name, shape=list(shape), us=s * 1e6,
                         gmac_per_s=qt.size / s / 1e9, gb_per_s=w.nbytes / s / 1e9))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="numba threads (default: physical cores)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--quick", action="store_true", help="fewer types and shapes, shorter timings")
    ap.add_argument("--model", help="also time the matrices of this GGUF file")
    args = ap.parse_args(argv)
    threads = R.set_threads(args.threads)
    min_s = 0.05 if args.quick else 0.2
    types = ["Q4_1", "Q8_0"] if args.quick else ["Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q8_0", "Q6_K", "F16", "F32"]
    shapes = [(1536, 576), (49152, 576)] if args.quick else [(576, 576), (1536, 576), (576, 1536), (2048, 1024), (49152, 576)]
    result = dict(threading_layer=R.threading_layer(), threads=threads, physical_cores=R.physical_cores())
    result["matvec"] = bench_matvec(types, shapes, min_s)
    result["decode_step_smollm2"] = decode_step_estimate(**SMOLLM2, repeat=3 if args.quick else 10)
    result["prefill_smollm2"] = [bench_prefill(**SMOLLM2, blas=b, repeat=2 if args.quick else 3) for b in (True, False)]
    if args.model:
        result["model"] = bench_model(args.model, min_s)
        result["model_memory"] = model_memory(args.model)
    if args.json:
        print(json.dumps(result, indent=1))
        return result
    print(f"threading layer {result['threading_layer']}, {threads} threads ({result['physical_cores']} physical cores)")
    print(f"{'type':6s} {'shape':>12s} {'µs':>9s} {'GMAC/s':>7s} {'GB/s':>6s} {'packed/file':>11s}")
    for r in result["matvec"]:
        print(f"{r['type']:6s} {str(tuple(r['shape'])):>12s} {r['us']:9.1f} {r['gmac_per_s']:7.2f} {r['gb_per_s']:6.2f} "
              f"{r['packed_bytes'] / r['file_bytes']:11.2f}")
    d = result["decode_step_smollm2"]
    print(f"decode step, SmolLM2 shapes (Q4_1 layers, Q8_0 head): {d['ms_per_token']:.2f} ms/token = {d['tokens_per_s']:.0f} tok/s "
          f"({d['ms_per_layer']:.3f} ms/layer, head {d['ms_head']:.2f} ms, {d['gmac_per_s']:.1f} GMAC/s)")
    for p in result["prefill_smollm2"]:
        print(f"prefill matmuls, {p['n_tokens']} tokens, {'dequantize + BLAS' if p['blas'] else 'fused tiles'}: {p['ms']:.1f} ms = "
              f"{p['tokens_per_s']:.0f} tok/s ({p['gmac_per_s']:.1f} GMAC/s)")
    for r in result.get("model", []):
        print(f"{r['tensor']:28s} {r['type']:5s} {str(tuple(r['shape'])):>14s} {r['us']:9.1f} µs {r['gmac_per_s']:6.2f} GMAC/s")
    if "model_memory" in result:
        m = result["model_memory"]
        print(f"packed matrices: {m['packed_bytes'] / 2**20:.1f} MB for {m['file_bytes'] / 2**20:.1f} MB in the file "
              f"({m['ratio']:.4f}); " + ", ".join(f"{k} {v['ratio']:.3f}" for k, v in sorted(m["per_type"].items())))
    return result


if __name__ == "__main__":
    main()
