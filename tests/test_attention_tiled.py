"""Chapter 14's tiled attention kernel against a plain float64 softmax attention: decode at depths (with the keys
split into chunks), prefill in token blocks on top of a cache, grouped-query heads, sliding windows, peaked scores."""
import numpy as np
import pytest
from llmbook.attention_kernels import tiled_attention

def reference(q, k_cache, v_cache, layer, pos0, scale, window):
    "softmax(q k^T * scale + causal/window mask) v per head, in float64."
    n, n_heads, hd = q.shape
    group = n_heads // k_cache.shape[1]
    L = pos0 + n
    K, V = k_cache[layer, :, :L].astype(np.float64), v_cache[layer, :, :L].astype(np.float64)
    p, j = pos0 + np.arange(n)[:, None], np.arange(L)[None, :]
    visible = (j <= p) & ((j > p - window) if window > 0 else True)
    out = np.empty(q.shape, np.float64)
    for h in range(n_heads):
        s = np.where(visible, q[:, h].astype(np.float64) @ K[h // group].T * scale, -np.inf)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h] = (w / w.sum(axis=1, keepdims=True)) @ V[h // group]
    return out

def make(n, n_heads, n_kv, hd, pos0, seed=0):
    r = np.random.default_rng(seed)
    shape = (2, n_kv, pos0 + n + 5, hd)
    return (r.standard_normal((n, n_heads, hd), dtype=np.float32), r.standard_normal(shape, dtype=np.float32),
            r.standard_normal(shape, dtype=np.float32))

SHAPES = [(9, 3, 64), (4, 1, 256), (32, 8, 64), (4, 4, 32)]   # SmolLM2, Gemma 3, Llama-3.2-1B, plain MHA
CASES = [(1, 0), (1, 63), (1, 300), (1, 1536), (1, 4095), (2, 0), (64, 0), (200, 0), (37, 100), (129, 515)]

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n,pos0", CASES)
@pytest.mark.parametrize("window", [0, 1, 64])
def test_against_reference(shape, n, pos0, window):
    q, k, v = make(n, *shape, pos0)
    out = np.full(q.shape, np.nan, np.float32)
    tiled_attention(q, k, v, 1, pos0, 1 / np.sqrt(shape[2]), window, out)
    np.testing.assert_allclose(out, reference(q, k, v, 1, pos0, 1 / np.sqrt(shape[2]), window), rtol=1e-4, atol=1e-4)

def test_peaked_scores():
    "Scores far from 0: the running maximum keeps every exp in range."
    q, k, v = make(50, 4, 2, 64, 30)
    q *= 20
    out = np.empty_like(q)
    tiled_attention(q, k, v, 0, 30, 0.125, 0, out)
    np.testing.assert_allclose(out, reference(q, k, v, 0, 30, 0.125, 0), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("hd", [24, 40, 72, 96])
@pytest.mark.parametrize("cache", ["f32", "f16"])
def test_head_lengths_lanes_do_not_divide(hd, cache):
    """Head lengths that the vector width (8 or 16 lanes) does not divide (24, 40, 72: the last few products one by
    one) or does (96), over an f32 cache and over f16 bits read in place: the float64 reference, and one answer (the
    last token alone gives the batch's bits)."""
    q, k, v = make(30, 6, 2, hd, 450, seed=hd)
    if cache == "f16": k, v = k.astype(np.float16), v.astype(np.float16)
    kb, vb = (k.view(np.uint16), v.view(np.uint16)) if cache == "f16" else (k, v)
    out, one = np.empty_like(q), np.empty_like(q[-1:])
    tiled_attention(q, kb, vb, 1, 450, hd**-0.5, 0, out)
    tiled_attention(q[-1:], kb, vb, 1, 479, hd**-0.5, 0, one)
    np.testing.assert_allclose(out, reference(q, k.astype(np.float32), v.astype(np.float32), 1, 450, hd**-0.5, 0), rtol=1e-4, atol=1e-4)
    assert np.array_equal(one[0], out[-1])


@pytest.mark.parametrize("n_heads,n_kv", [(4, 4), (4, 2), (9, 3), (8, 2), (7, 1)])
def test_decode_rows_in_blocks_of_any_size(n_heads, n_kv):
    """A decode step has `n_heads // n_kv` query rows per KV head (1, 2, 3, 4, 7: blocks of 4 and the 1-3 rows left),
    a batch of 20 tokens has 20 times as many (blocks of 4): the last token alone gives the batch's bits, and both the
    float64 reference."""
    q, k, v = make(20, n_heads, n_kv, 64, 300, seed=10 * n_heads + n_kv)
    out, one = np.empty_like(q), np.empty_like(q[-1:])
    tiled_attention(q, k, v, 1, 300, 0.125, 0, out)
    tiled_attention(q[-1:], k, v, 1, 319, 0.125, 0, one)
    np.testing.assert_allclose(out, reference(q, k, v, 1, 300, 0.125, 0), rtol=1e-4, atol=1e-4)
    assert np.array_equal(one[0], out[-1])

def test_same_bits_on_any_thread_count():
    """How many segments a task sums follows the thread count (about two tasks a thread); each segment is summed from
    scratch and the segments folded in order, so 1 and 2 threads give the same bits, 2,000 keys deep."""
    import numba
    q, k, v = make(17, 9, 3, 64, 2000, seed=5)
    outs = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        out, one = np.empty_like(q), np.empty_like(q[-1:])
        tiled_attention(q, k, v, 1, 2000, 0.125, 0, out)
        tiled_attention(q[-1:], k, v, 1, 2016, 0.125, 0, one)
        outs.append((out, one))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert all(np.array_equal(a, b) for a, b in zip(outs[0], outs[1]))
    assert np.array_equal(outs[0][1][0], outs[0][0][-1])

_FRESH_OR_CACHED = """
import sys, numpy as np
from llmbook.attention_kernels import tiled_attention, _tiled_attention, rmsnorm
rng = np.random.default_rng(0)
q = rng.standard_normal((1, 9, 64)).astype(np.float32)
K = (rng.standard_normal((1, 3, 2048, 64)) * 0.5).astype(np.float16).view(np.uint16)
V = rng.standard_normal((1, 3, 2048, 64)).astype(np.float16).view(np.uint16)
X = rng.standard_normal((5, 576)).astype(np.float32)
o, y = np.empty_like(q), np.empty_like(X)
tiled_attention(q, K, V, 0, 2000, 0.125, 0, o); rmsnorm(X, np.ones(576, np.float32), 1e-5, y)
cached = bool(_tiled_attention.stats.cache_hits) and bool(rmsnorm.stats.cache_hits)
if not cached: sys.exit(0)                                         # the first run: the cache is filled
_tiled_attention.recompile(); rmsnorm.recompile()                   # the same kernels compiled again, here
o2, y2 = np.empty_like(q), np.empty_like(X)
tiled_attention(q, K, V, 0, 2000, 0.125, 0, o2); rmsnorm(X, np.ones(576, np.float32), 1e-5, y2)
print(cached, np.array_equal(o, o2) and np.array_equal(y, y2))
"""

def test_kernels_from_the_cache_give_the_compiled_bits():
    """A process that loads the kernels from numba's cache gets the bits a process that compiles them gets: no sum's
    order is left to LLVM ("reassoc" let it re-add a parallel kernel's sums when numba linked it again, and a program's
    first run and its next ones gave other logits). A process loads the kernels from numba's cache (filled first, if it
    was empty), then compiles them again in the same process and compares."""
    import subprocess, sys
    # numba's own cache, which earlier runs have most likely filled: then one process loads and compiles again (the
    # kernel takes a minute or more to compile on a slow machine); if it was empty, the first run fills it
    run = lambda: subprocess.run([sys.executable, "-c", _FRESH_OR_CACHED], capture_output=True, text=True, timeout=900)
    second = run(); assert second.returncode == 0, second.stderr[-2000:]
    if second.stdout.split() == []: second = run(); assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.split() == ["True", "True"], second.stdout


_DECODE_FIRST = """
import numpy as np
from llmbook.attention_kernels import decode_attention, cache_row
K = np.random.default_rng(0).integers(0, 60, (1, 3, 512, 64)).astype(np.uint16)     # f16 bits
q = np.ones((1, 9, 64), np.float32); o = np.empty_like(q)
decode_attention(q, K, np.array([cache_row(K, K, 0, 400)], np.int64), 0.125, 0, o)
print(np.isfinite(o).all())
"""

def test_decode_attention_compiles_first_in_a_fresh_process(tmp_path):
    """A process whose first kernel is `decode_attention`, on an empty numba cache (its `_threads` once stopped LLVM:
    'Symbol not found: get_num_threads', the thread pool not loaded yet)."""
    import os, subprocess, sys
    r = subprocess.run([sys.executable, "-c", _DECODE_FIRST], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0 and r.stdout.split() == ["True"], r.stderr[-2000:]
