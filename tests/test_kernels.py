"""Every kernel of llmbook.kernels and llmbook.packed, the threads of llmbook.runtime (and chapter 14's layer kernels in llmbook.attention_kernels) against a numpy reference, on random data and on the real tensors of
SmolLM2 (Q4_1, Q8_0) and Gemma 3 (Q5_0, Q8_0, Q4_K, Q6_K).

Tolerances: the kernels add in float32, in blocks and 4 rows at a time, in an order that differs from
numpy's float64 reference. For a dot product of n terms the float32 rounding error grows like
sqrt(n) * 2**-24 * sum|w_i x_i|, a few 1e-7 relative to the largest output for n in the hundreds to a few
thousand; we allow 2e-5 of the largest |output| (plus 1e-6 absolute), which is still ~100x tighter than
any indexing or scaling mistake would produce (those give errors of the order of the outputs themselves).
"""
import os, subprocess, sys
import numpy as np
import pytest
import gguf
from gguf import GGUFReader

from llmbook.tensors import GGMLType, QTensor
from llmbook import kernels as K
from llmbook import packed as P
from llmbook import runtime as R
from llmbook import attention as A
from llmbook import attention_kernels as AK

TYPES = ["Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q8_0", "Q6_K", "F16", "F32"]
K_TYPES = {"Q4_K", "Q5_K", "Q6_K"}


def reference_dense(qt: QTensor) -> np.ndarray:
    "gguf-py's dequantizer: an implementation independent of ours."
    raw = qt.data.reshape(qt.n_rows, -1)
    return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(int(qt.type))).reshape(qt.shape).astype(np.float32)


def assert_matvec_close(got, dense, x):
    exact = dense.astype(np.float64) @ x.astype(np.float64)
    scale = np.abs(exact).max()
    err = np.abs(got - exact).max()
    assert err <= 2e-5 * scale + 1e-6, f"max error {err:.3g} vs largest output {scale:.3g}"


# ------------------------------------------------------------------ random data, every type, odd sizes
@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("n_rows", [1, 3, 5, 13, 64, 130])
def test_matvec_random(name, n_rows):
    n_cols = 512 if name in K_TYPES else 96
    qt = P.random_qtensor(name, (n_rows, n_cols), seed=n_rows)
    w = P.pack(qt)
    x = np.random.default_rng(n_rows).standard_normal(n_cols).astype(np.float32)
    dense = reference_dense(qt)
    assert_matvec_close(w.matvec(x), dense, x)
    out = np.full(n_rows, np.nan, np.float32)
    assert w.matvec(x, out) is out and np.isfinite(out).all()
    np.testing.assert_allclose(w.rows(np.arange(n_rows)), dense, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", TYPES)
def test_rows_and_matmul_random(name):
    n_cols = 768 if name in K_TYPES else 160
    qt = P.random_qtensor(name, (70, n_cols), seed=7)
    w = P.pack(qt)
    dense = reference_dense(qt)
    ids = [69, 0, 5, 5, 33]
    np.testing.assert_allclose(w.rows(ids), dense[ids], rtol=1e-6, atol=1e-7)
    X = np.random.default_rng(3).standard_normal((9, n_cols)).astype(np.float32)
    exact = X.astype(np.float64) @ dense.T.astype(np.float64)
    tol = 2e-5 * np.abs(exact).max() + 1e-6
    for n in (9, 4, 3, 2):                                       # whole and partial 4-token steps
        assert np.abs(w.matmul(X[:n]) - exact[:n]).max() <= tol
    wide = np.full((9, 75), np.nan, np.float32)                  # a stacked projection's part: columns 3..72
    w.matmul(X, wide, col0=3)
    assert np.abs(wide[:, 3:73] - exact).max() <= tol and np.isnan(wide[:, [0, 1, 2, 73, 74]]).all()
    assert np.abs(w.matmul(X[:1]) - exact[:1]).max() <= tol         # one token goes through matvec


def test_matvec_large_random_q4_1():
    "Many row groups across threads, the shape of SmolLM2's output head, against a dense product."
    qt = P.random_qtensor("Q4_1", (4099, 576), seed=11)
    x = np.random.default_rng(2).standard_normal(576).astype(np.float32)
    assert_matvec_close(P.pack(qt).matvec(x), reference_dense(qt), x)


def test_stacked_pack_equals_separate():
    parts = [P.random_qtensor("Q5_0", (n, 256), seed=n) for n in (16, 7, 9)]
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    stacked = P.pack(*parts)
    assert stacked.shape == (32, 256) and stacked.layout == "q4"
    # same arithmetic per row; only fastmath's freedom to contract/reorder differs by a row's place in its group of 4
    np.testing.assert_allclose(stacked.matvec(x), np.concatenate([P.pack(p).matvec(x) for p in parts]), rtol=1e-6, atol=1e-6)
    f16 = P.pack(P.random_qtensor("F16", (4, 64), 1), P.random_qtensor("F16", (3, 64), 2))
    assert len(f16.arrays) == 1 and f16.shape == (7, 64)


@pytest.mark.parametrize("name", TYPES)
def test_stacked_every_type_odd_rows(name):
    "q, k, v of odd heights stacked into one matrix: matvec, rows and matmul against the dense stack."
    n_cols = 512 if name in K_TYPES else 96
    parts = [P.random_qtensor(name, (n, n_cols), seed=n) for n in (13, 5, 3)]
    w = P.pack(*parts)
    assert w.shape == (21, n_cols) and w.type.name == name
    dense = np.concatenate([reference_dense(p) for p in parts])
    x = np.random.default_rng(5).standard_normal(n_cols).astype(np.float32)
    assert_matvec_close(w.matvec(x), dense, x)
    np.testing.assert_allclose(w.rows(np.arange(21)[::-1]), dense[::-1], rtol=1e-6, atol=1e-7)
    X = np.random.default_rng(6).standard_normal((3, n_cols)).astype(np.float32)
    exact = X.astype(np.float64) @ dense.T.astype(np.float64)
    assert np.abs(w.matmul(X) - exact).max() <= 2e-5 * np.abs(exact).max() + 1e-6


def test_f16_to_f32_every_bit_pattern():
    "The kernels' half -> float conversion (an LLVM fpext) agrees with numpy on all 65536 f16 values, NaN and inf included."
    @P.njit
    def widen(bits):
        out = np.empty(bits.size, np.float32)
        for i in range(bits.size): out[i] = P.f16_to_f32(bits[i])
        return out
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got, expect = widen(bits), bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))
    finite = ~np.isnan(expect)
    np.testing.assert_array_equal(got[finite].view(np.uint32), expect[finite].view(np.uint32))   # bit for bit, -0 too


def test_bits_f32_every_byte_every_shift():
    "The 32-bit bit-field intrinsic: (byte >> shift) & mask as float32 for all 256 bytes, shifts 0..7 and every mask the kernels use."
    @P.njit
    def fields(bytes_, shift, mask):
        out = np.empty(bytes_.size, np.float32)
        for i in range(bytes_.size): out[i] = P.bits_f32(bytes_[i], shift, mask)
        return out
    byte = np.arange(256, dtype=np.uint8)
    for shift in range(8):
        for mask in (1, 3, 15, 255):
            got = fields(byte, shift, mask)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, ((byte.astype(np.int64) >> shift) & mask).astype(np.float32), err_msg=f"{shift=} {mask=}")
    # wider integer inputs are zero-extended or used as is (int8 -1 is the byte 255, not a sign-extended -1)
    np.testing.assert_array_equal(fields(np.arange(-128, 128, dtype=np.int8), 4, 15), ((np.arange(256) - 128) % 256 >> 4).astype(np.float32))
    words = np.array([0xFFFFFFFF, 0x80000001, 0x12345678], np.uint32)
    np.testing.assert_array_equal(fields(words, 28, 15), np.array([15, 8, 1], np.float32))
    np.testing.assert_array_equal(fields(words, 0, 0xFFFFFFFF), words.astype(np.float32))   # 32-bit unsigned, not negative


def test_nibbles_crumbs_and_fifth_bits_every_byte():
    "The helpers built on bits_f32 split every byte exactly; _levels5 adds the right fifth bits for each of the 4 rows."
    @P.njit
    def split(q, h):
        n = q.size
        nib, crumbs, lv = np.empty((n, 2), np.float32), np.empty((n, 4), np.float32), np.empty((n, 4, 2), np.float32)
        for k in range(n):
            nib[k, 0], nib[k, 1] = P.nibbles(q[k])
            crumbs[k, 0], crumbs[k, 1], crumbs[k, 2], crumbs[k, 3] = P._crumbs(q[k])
            lv[k, 0, 0], lv[k, 0, 1] = P._levels5(q[k], h[k], 0)
            lv[k, 1, 0], lv[k, 1, 1] = P._levels5(q[k], h[k], 1)
            lv[k, 2, 0], lv[k, 2, 1] = P._levels5(q[k], h[k], 2)
            lv[k, 3, 0], lv[k, 3, 1] = P._levels5(q[k], h[k], 3)
        return nib, crumbs, lv
    q, h = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))   # every (nibble byte, bit byte) pair
    q, h = q.reshape(-1), h.reshape(-1)
    nib, crumbs, lv = split(q, h)
    qi, hi = q.astype(np.int64), h.astype(np.int64)
    np.testing.assert_array_equal(nib, np.stack([qi & 15, qi >> 4], 1))
    np.testing.assert_array_equal(crumbs, np.stack([(qi >> s) & 3 for s in (0, 2, 4, 6)], 1))
    for i in range(4):
        np.testing.assert_array_equal(lv[:, i, 0], (qi & 15) + 16 * ((hi >> (2 * i)) & 1))
        np.testing.assert_array_equal(lv[:, i, 1], (qi >> 4) + 16 * ((hi >> (2 * i + 1)) & 1))


# packed bytes per block against the file's: the scales stay as stored (f16, 6-bit sc/mn unpacked to a byte each)
PACKED_OVER_FILE = {"Q4_0": 1.0, "Q4_1": 1.0, "Q5_0": 1.0, "Q5_1": 1.0, "Q8_0": 1.0, "Q4_K": 148 / 144,
                    "Q5_K": 180 / 176, "Q6_K": 1.0, "F16": 1.0, "F32": 1.0}


@pytest.mark.parametrize("name", TYPES)
def test_packed_memory_stays_at_file_size(name):
    qt = P.random_qtensor(name, (64, 512))
    assert P.pack(qt).nbytes == pytest.approx(PACKED_OVER_FILE[name] * qt.nbytes, rel=1e-12), name
    stacked = P.pack(P.random_qtensor(name, (6, 512), 1), P.random_qtensor(name, (3, 512), 2))   # 9 rows: q5's bits pad to 12
    assert stacked.nbytes <= PACKED_OVER_FILE[name] * 9 * qt.nbytes / 64 * 1.15


# ------------------------------------------------------------------ bad input: clear errors, no crash
def test_bad_input_errors():
    w = P.pack(P.random_qtensor("Q4_1", (8, 64)))
    with pytest.raises(ValueError, match="x must be a contiguous float32 vector of 64"):
        w.matvec(np.zeros(63, np.float32))
    with pytest.raises(ValueError, match="float32"):
        w.matvec(np.zeros(64, np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        w.matvec(np.zeros(128, np.float32)[::2])
    with pytest.raises(ValueError, match="out must be"):
        w.matvec(np.zeros(64, np.float32), np.zeros(7, np.float32))
    with pytest.raises(IndexError, match="0..7"):
        w.rows([8])
    with pytest.raises(IndexError):
        w.rows([-1])
    with pytest.raises(ValueError, match="shape"):
        w.matmul(np.zeros((3, 65), np.float32))
    with pytest.raises(ValueError, match="room for 8 columns"):
        w.matmul(np.zeros((3, 64), np.float32), np.zeros((3, 10), np.float32), col0=3)
    with pytest.raises(ValueError, match="out must be"):
        w.matmul(np.zeros((3, 64), np.float32), np.zeros((2, 8), np.float32))
    with pytest.raises(ValueError, match="share type and width"):
        P.pack(P.random_qtensor("Q4_1", (8, 64)), P.random_qtensor("Q4_0", (8, 64)))
    with pytest.raises(ValueError, match="share type and width"):
        P.pack(P.random_qtensor("Q4_1", (8, 64)), P.random_qtensor("Q4_1", (8, 96)))
    with pytest.raises(NotImplementedError, match="Q2_K"):
        P.pack(QTensor(np.zeros(84, np.uint8), GGMLType.Q2_K, (1, 256)))
    with pytest.raises(ValueError, match="2-D"):
        P.pack(P.random_qtensor("F32", (2, 2, 32)))
    with pytest.raises(TypeError):
        P.pack(np.zeros((2, 32), np.float32))
    with pytest.raises(ValueError):
        P.pack()
    with pytest.raises(ValueError, match="positive integer"):
        R.set_threads(0)


# ------------------------------------------------------------------ real tensors
def real_matrices(path, max_rows=3000):
    "The 2-D tensors of a GGUF file as QTensors built from gguf-py's reading (big ones cut to max_rows rows)."
    reader = GGUFReader(path)
    for t in reader.tensors:
        if len(t.shape) != 2: continue
        shape = tuple(int(s) for s in t.shape[::-1])
        qt = QTensor(np.ascontiguousarray(t.data).reshape(-1).view(np.uint8), int(t.tensor_type), shape)
        yield t.name, qt[: min(max_rows, shape[0])]


def test_real_model_matvec(real_model_path):
    seen = set()
    rng = np.random.default_rng(0)
    for name, qt in real_matrices(real_model_path):
        kind = (qt.type, qt.shape)
        if kind in seen: continue                      # each type and shape once: covers every layer kind
        seen.add(kind)
        w = P.pack(qt)
        x = rng.standard_normal(qt.shape[1]).astype(np.float32)
        dense = reference_dense(qt)
        assert_matvec_close(w.matvec(x), dense, x)
        ids = np.array([0, qt.shape[0] - 1, qt.shape[0] // 2])
        np.testing.assert_allclose(w.rows(ids), dense[ids], rtol=1e-6, atol=1e-7, err_msg=name)
        X = rng.standard_normal((5, qt.shape[1])).astype(np.float32)
        exact = X.astype(np.float64) @ dense.T
        assert np.abs(w.matmul(X) - exact).max() <= 2e-5 * np.abs(exact).max() + 1e-6, name
    types = {GGMLType(t).name for t, _ in seen}
    expected = {"Q4_1", "Q8_0"} if "SmolLM2" in str(real_model_path) else {"Q5_0", "Q8_0", "Q4_K", "Q6_K"}
    assert expected <= types, types


def test_real_stacked_qkv_and_gate_up(smollm2_path):
    tensors = dict(real_matrices(smollm2_path, max_rows=10 ** 6))
    x = np.random.default_rng(1).standard_normal(576).astype(np.float32)
    for names in (["blk.3.attn_q.weight", "blk.3.attn_k.weight", "blk.3.attn_v.weight"],
                  ["blk.3.ffn_gate.weight", "blk.3.ffn_up.weight"]):
        qts = [tensors[n] for n in names]
        dense = np.concatenate([reference_dense(q) for q in qts])
        assert_matvec_close(P.pack(*qts).matvec(x), dense, x)


# ------------------------------------------------------------------ chapter 04's block dot (Part I)
@pytest.mark.parametrize("n_rows,n_cols", [(1, 32), (3, 64), (37, 576), (130, 1536)])
def test_block_dot_q4_1_random(n_rows, n_cols):
    "Chapter 04's numpy block dot and plain numba kernel against gguf-py's dequantizer, on odd shapes."
    qt = P.random_qtensor("Q4_1", (n_rows, n_cols), seed=n_rows)
    x = np.random.default_rng(n_rows).standard_normal(n_cols).astype(np.float32)
    dense, arrays = reference_dense(qt), K.q4_1_arrays(qt)
    out = np.full(n_rows, np.nan, np.float32)
    K.matvec_q4_1_numba(*arrays, x, out)
    assert_matvec_close(out, dense, x)
    assert_matvec_close(K.matvec_q4_1_numpy(*arrays, x), dense, x)


def test_block_dot_q4_1_real(smollm2_path):
    "Chapter 04's kernel on each shape of SmolLM2's Q4_1 matrices, the same products as the packed kernels; other types refused."
    seen = set()
    rng = np.random.default_rng(4)
    for name, qt in real_matrices(smollm2_path):
        if qt.type != GGMLType.Q4_1 or qt.shape in seen: continue
        seen.add(qt.shape)
        x = rng.standard_normal(qt.shape[1]).astype(np.float32)
        out = np.empty(qt.shape[0], np.float32)
        K.matvec_q4_1_numba(*K.q4_1_arrays(qt), x, out)
        assert_matvec_close(out, reference_dense(qt), x)
        np.testing.assert_allclose(out, P.pack(qt).matvec(x), rtol=1e-5, atol=1e-5 * np.abs(out).max(), err_msg=name)
    assert len(seen) == 4, seen                      # q and o, k and v, gate and up, down
    with pytest.raises(ValueError, match="Q4_1"):
        K.q4_1_arrays(P.random_qtensor("Q8_0", (2, 32)))


# ------------------------------------------------------------------ the layer kernels vs chapter 05
def test_rmsnorm_and_add_rmsnorm():
    rng = np.random.default_rng(0)
    for shape in [(1, 576), (7, 640), (9, 64), (4, 256)]:        # hidden states, per-head q/k norms
        x = rng.standard_normal(shape).astype(np.float32) * 3
        w = rng.standard_normal(shape[1]).astype(np.float32)
        out = np.empty_like(x)
        AK.rmsnorm(x, w, 1e-6, out)
        np.testing.assert_allclose(out, A.rms_norm(x, w, 1e-6), rtol=1e-5, atol=1e-6)
        y = x.copy(); AK.rmsnorm(y, w, 1e-6, y)                    # in place
        np.testing.assert_allclose(y, out, rtol=1e-6, atol=1e-7)
        d = rng.standard_normal(shape).astype(np.float32)
        h = x.copy(); AK.add_rmsnorm(h, d, w, 1e-5, out)
        np.testing.assert_array_equal(h, x + d)
        np.testing.assert_allclose(out, A.rms_norm(x + d, w, 1e-5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_heads,n_kv", [(9, 3), (4, 1), (4, 4)])
@pytest.mark.parametrize("window", [0, 1, 7])
def test_attention_matches_chapter_05(n_heads, n_kv, window):
    rng = np.random.default_rng(n_heads + window)
    n_layers, n_ctx, hd, layer = 3, 40, 32, 2
    kc = rng.standard_normal((n_layers, n_kv, n_ctx, hd)).astype(np.float32)
    vc = rng.standard_normal((n_layers, n_kv, n_ctx, hd)).astype(np.float32)
    for pos0, n in [(0, 1), (0, 10), (17, 1), (20, 13)]:
        q = rng.standard_normal((n, n_heads, hd)).astype(np.float32) * 2
        out = np.empty_like(q)
        AK.tiled_attention(q, kc, vc, layer, pos0, hd ** -0.5, window, out)
        n_keys = pos0 + n
        expect = A.attention(q, kc[layer, :, :n_keys], vc[layer, :, :n_keys], np.arange(pos0, pos0 + n),
                             hd ** -0.5, window or None)
        np.testing.assert_allclose(out, expect, rtol=1e-4, atol=2e-5)


def test_attention_large_scores_do_not_overflow():
    kc = np.ones((1, 1, 8, 4), np.float32) * 100
    vc = np.arange(32, dtype=np.float32).reshape(1, 1, 8, 4)
    q = np.ones((1, 1, 4), np.float32) * 100
    out = np.empty_like(q)
    AK.tiled_attention(q, kc, vc, 0, 7, 1.0, 0, out)             # scores of 40000: exp would overflow without the max
    np.testing.assert_allclose(out[0, 0], vc[0, 0].mean(axis=0), rtol=1e-5)


def test_gates():
    rng = np.random.default_rng(2)
    g = np.concatenate([rng.standard_normal(2044) * 5, [-500, -90, 90, 500]]).astype(np.float32)
    u = rng.standard_normal(2048).astype(np.float32)
    out = np.empty_like(g)
    AK._silu_mul(g, u, out)
    np.testing.assert_allclose(out, A.swiglu(g, u), rtol=1e-5, atol=1e-6)
    AK._gelu_mul(g, u, out)
    np.testing.assert_allclose(out, A.geglu_tanh(g, u), rtol=1e-5, atol=1e-6)
    stacked = np.concatenate([g.reshape(2, 1024), u.reshape(2, 1024)], axis=1)          # (n, 2*n_ff) of a stacked product
    act = np.empty((2, 1024), np.float32)
    AK.swiglu_stacked(stacked, act)
    np.testing.assert_allclose(act.reshape(-1), A.swiglu(g, u), rtol=1e-5, atol=1e-6)
    AK.geglu_stacked(stacked, act)
    np.testing.assert_allclose(act.reshape(-1), A.geglu_tanh(g, u), rtol=1e-5, atol=1e-6)
    g2, u2, o2 = g.reshape(2, 1024), u.reshape(2, 1024), np.empty((2, 1024), np.float32)   # any shape
    AK._silu_mul(g2, u2, o2)
    np.testing.assert_allclose(o2.reshape(-1), A.swiglu(g, u), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ threads
def test_threads_in_this_process():
    assert R.threading_layer() in ("tbb", "omp", "workqueue")
    assert R.physical_cores() >= 1
    n = R.set_threads(1)
    assert n == 1
    assert R.set_threads() == min(R.physical_cores(), R.numba.config.NUMBA_NUM_THREADS)


def _fresh(code, **env):
    full = {**os.environ, **env}
    if "NUMBA_THREADING_LAYER" not in env: full.pop("NUMBA_THREADING_LAYER", None)
    return subprocess.run([sys.executable, "-W", "always", "-c", code], env=full, capture_output=True, text=True, timeout=300)


def test_tbb_from_a_fresh_interpreter():
    "A plain `import llmbook.runtime` in a new process runs parallel kernels on TBB (pip's tbb, loaded by path)."
    r = _fresh("from llmbook.runtime import threading_layer; print(threading_layer())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "tbb", r.stdout + r.stderr


def test_user_choice_of_threading_layer_wins():
    r = _fresh("from llmbook.runtime import threading_layer; print(threading_layer())", NUMBA_THREADING_LAYER="workqueue")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "workqueue"


def test_missing_tbb_warns_and_falls_back():
    "Without TBB, the first kernel (here: threading_layer) warns and runs on another layer; the import alone says nothing."
    code = ("import ctypes\nreal = ctypes.CDLL\n"
            "def hide_tbb(name, *a, **k):\n"
            "    if 'tbb' in str(name): raise OSError('hidden for the test')\n"
            "    return real(name, *a, **k)\n"
            "ctypes.CDLL = hide_tbb\n"
            "import warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import llmbook.runtime as R\n"
            "    at_import = [str(x.message) for x in w if 'TBB' in str(x.message)]\n"
            "    layer = R.threading_layer()\n"
            "print(at_import)\n"
            "print([str(x.message) for x in w if 'TBB' in str(x.message)][:1])\n"
            "print(layer)\n")
    r = _fresh(code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "[]", lines
    assert "TBB threading layer is not available" in lines[1]
    assert lines[2] in ("omp", "workqueue")


LIBTBB_LOADED = "any('libtbb' in line for line in open('/proc/self/maps'))"


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps (Linux)")
def test_import_changes_no_process_setting(smollm2_path):
    """`import llmbook` and reading a GGUF file leave numba as they found it: no threading layer set, no libtbb loaded,
    numba's TBB pool not imported. The layer is chosen when a kernel first runs."""
    code = ("import sys, numba\n"
            "before = numba.config.THREADING_LAYER\n"
            "import llmbook\n"
            f"f = llmbook.GGUFFile({str(smollm2_path)!r}); f.metadata['general.architecture']; f.dequantize('output_norm.weight')\n"
            f"print(numba.config.THREADING_LAYER == before, {LIBTBB_LOADED}, 'numba.np.ufunc.tbbpool' in sys.modules)\n"
            "from llmbook.runtime import set_threads, threading_layer\n"
            "set_threads(1)\n"
            f"print(numba.config.THREADING_LAYER, {LIBTBB_LOADED}, threading_layer())\n")
    r = _fresh(code)
    assert r.returncode == 0, r.stderr
    untouched, chosen = r.stdout.strip().splitlines()
    assert untouched == "True False False", untouched
    assert chosen == "tbb True tbb", chosen


def test_first_pack_chooses_the_layer():
    "Packing a matrix (the first step before any product) chooses the layer, so a plain product runs on TBB."
    code = ("import numpy as np\nfrom llmbook.packed import random_qtensor\nfrom llmbook.packed import pack\nfrom llmbook.runtime import threading_layer\n"
            "w = pack(random_qtensor('Q4_1', (64, 64)))\n"
            "w.matvec(np.ones(64, np.float32))\n"
            "print(threading_layer())\n")
    r = _fresh(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "tbb", r.stdout + r.stderr


def test_load_freezes_numba_once_and_never_the_model(smollm2_path):
    """`load` starts numba first (chapter 11's `start_numba`): numba's registries and what was alive before are frozen
    out of the collector's walks, once per process; the model's own objects, built after, are not frozen, so a model
    dropped in a cycle is still collected."""
    code = ("import gc, weakref, llmbook\n"
            "assert gc.get_freeze_count() == 0\n"
            f"m = llmbook.load({str(smollm2_path)!r}, n_threads=1)\n"
            "frozen = gc.get_freeze_count()\n"
            "tracked = set(map(id, gc.get_objects()))\n"
            "print(frozen > 50_000, id(m) in tracked, id(m.tokenizer) in tracked)\n"
            f"m2 = llmbook.load({str(smollm2_path)!r}, n_threads=1)\n"
            "print(gc.get_freeze_count() == frozen)\n"
            "gone = weakref.ref(m2); m2.cycle = m2; del m2; gc.collect()\n"
            "print(gone() is None)\n")
    r = _fresh(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "True", "True"], r.stdout
