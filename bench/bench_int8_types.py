"""Chapter 13's integer kernels per weight type on a Llama-3.2-1B-sized matrix (8192 x 2048): matrix x vector in
GB/s of weights read (decode) and a 64-token batch in GMAC/s (prefill), on random blocks with sane scales.

    python bench/bench_int8_types.py [--threads N] [--types Q4_K IQ4_NL ...] [--json]

The machine may be shared: each figure is the best of several runs; run it twice.
"""
import argparse, json, time
import numpy as np
from llmbook.int8 import BlockMatrix, kernel_set
from llmbook.runtime import set_threads
from llmbook.tensors import QTensor, GGMLType, type_info

SCALE_AT = {"Q6_K": [208], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q2_K": [80, 82], "Q3_K": [108]}   # f16 scale bytes

def random_matrix(name, rows, cols, rng):
    "Random blocks of type `name` whose f16 scales are small and positive (random bytes there would be inf/NaN)."
    info = type_info(GGMLType[name])
    raw = rng.integers(0, 256, (rows * cols // info.block_size, info.type_size), dtype=np.uint8)
    for at in SCALE_AT.get(name, [0, 2] if name in ("Q4_1", "Q5_1") else [0]):
        raw[:, at:at + 2] = np.frombuffer(np.float16(0.001).tobytes(), np.uint8)
    return QTensor(raw.reshape(-1), GGMLType[name], (rows, cols))

def best(fn, repeat=7):
    fn(); b = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); b = min(b, time.perf_counter() - t0)
    return b

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--types", nargs="*", default=["Q4_0", "Q4_K", "Q6_K", "Q8_0", "IQ4_NL", "IQ4_XS"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if kernel_set() != "avx2": raise SystemExit("the integer kernels need AVX2")
    n = set_threads(args.threads)
    rng = np.random.default_rng(0)
    rows, cols, tokens = 8192, 2048, 64
    x, X = rng.standard_normal(cols).astype(np.float32), rng.standard_normal((tokens, cols)).astype(np.float32)
    out, Y = np.empty(rows, np.float32), np.empty((tokens, rows), np.float32)
    results = []
    for name in args.types:
        m = BlockMatrix(random_matrix(name, rows, cols, rng))
        tv, tg = best(lambda: m.matvec(x, out)), best(lambda: m.matmul(X, Y))
        results.append(dict(type=name, bits_per_weight=type_info(GGMLType[name]).bits_per_weight,
                            matvec_gb_s=m.nbytes / tv / 1e9, gemm_gmac_s=rows * cols * tokens / tg / 1e9))
    if args.json: print(json.dumps(dict(threads=n, results=results), indent=1)); return
    print(f"{n} threads, {rows} x {cols}, batch of {tokens}")
    print(f"{'type':8s} {'bits/w':>6s} {'matvec GB/s':>12s} {'64-token GMAC/s':>16s}")
    for r in results: print(f"{r['type']:8s} {r['bits_per_weight']:6.2f} {r['matvec_gb_s']:12.1f} {r['gemm_gmac_s']:16.1f}")

if __name__ == "__main__": main()
