"""Chapter 13's float kernels (`llmbook.floats`): F16, BF16 and F32 weights read in place; the one-token kernel and
the batch kernel sum every dot product in one written-down order, so a token's row of a batch's product is the
one-token product bit for bit (asserted exactly), on any thread count."""
import numpy as np
import pytest
from llmbook.tensors import GGMLType, QTensor, f32_to_bf16
from llmbook.quants import dequantize
from llmbook.int8 import kernel_set
from llmbook.runtime import set_threads
from llmbook.floats import FloatMatrix, FLOAT_KERNELS

pytestmark = pytest.mark.skipif(kernel_set() != "avx2", reason="the float kernels are AVX2 code")
TYPES = [GGMLType.F16, GGMLType.BF16, GGMLType.F32]


def as_qtensor(W, t):
    if t == GGMLType.BF16: return QTensor(f32_to_bf16(W).view(np.uint8).reshape(-1), t, W.shape)
    return QTensor.from_array(W.astype(np.float16 if t == GGMLType.F16 else np.float32))


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("n_rows,n_tokens", [(1, 1), (5, 3), (37, 7), (64, 16), (130, 9)])
def test_batch_rows_are_the_one_token_products(t, n_rows, n_tokens):
    rng = np.random.default_rng(n_rows * 31 + n_tokens)
    W = (rng.standard_normal((n_rows, 272)) * 0.1).astype(np.float32)
    X = rng.standard_normal((n_tokens, 272)).astype(np.float32)
    qt = as_qtensor(W, t); m = FloatMatrix(qt)
    batch = m.matmul(X)
    np.testing.assert_array_equal(batch, np.stack([m.matvec(x) for x in X]))
    want = X.astype(np.float64) @ dequantize(qt).astype(np.float64).T
    # float32 sums of 272 products against float64's: measured <= 3e-7 of the largest output here
    assert np.abs(batch - want).max() <= 2e-6 * np.abs(want).max()
    np.testing.assert_array_equal(m.rows(np.arange(n_rows)[::-1]), dequantize(qt).reshape(n_rows, 272)[::-1])


@pytest.mark.parametrize("t", TYPES)
def test_long_rows(t):
    "Rows of 1056 inputs, 13 of them (an odd count: the one-token kernel sums the last row twice): the batch's rows are the one-token products."
    rng = np.random.default_rng(5)
    n = 1056
    W = (rng.standard_normal((13, n)) * 0.05).astype(np.float32); X = rng.standard_normal((6, n)).astype(np.float32)
    m = FloatMatrix(as_qtensor(W, t))
    np.testing.assert_array_equal(m.matmul(X), np.stack([m.matvec(x) for x in X]))


@pytest.mark.parametrize("t", TYPES)
def test_odd_and_even_vectors(t):
    """Rows of an odd number of vectors and of an even number, narrow and wide, 11 rows (an odd count: pairs of rows
    r and r + 6, the last row twice): each (token, row) is one chain in both kernels."""
    from llmbook.floats import LANES
    rng = np.random.default_rng(7)
    for n in (LANES, 2 * LANES, 5 * LANES, 36 * LANES, 37 * LANES):
        W = (rng.standard_normal((11, n)) * 0.05).astype(np.float32); X = rng.standard_normal((5, n)).astype(np.float32)
        m = FloatMatrix(as_qtensor(W, t))
        np.testing.assert_array_equal(m.matmul(X), np.stack([m.matvec(x) for x in X]))


@pytest.mark.parametrize("t", TYPES)
def test_wide_rows_four_at_a_time(t):
    """Rows wider than `_WIDE` go four at a time through the one-token kernel (a row count that 4 does not divide, an
    odd number of vectors): each row's sum is still the batch kernel's, bit for bit."""
    from llmbook.floats import _WIDE, LANES
    rng = np.random.default_rng(11)
    n = _WIDE + 3 * LANES
    W = (rng.standard_normal((14, n)) * 0.05).astype(np.float32); X = rng.standard_normal((3, n)).astype(np.float32)
    qt = as_qtensor(W, t); m = FloatMatrix(qt)
    batch = m.matmul(X)
    np.testing.assert_array_equal(batch, np.stack([m.matvec(x) for x in X]))
    want = X.astype(np.float64) @ dequantize(qt).astype(np.float64).T
    assert np.abs(batch - want).max() <= 2e-6 * np.abs(want).max()


@pytest.mark.parametrize("t", TYPES)
def test_stacked_in_place_and_threads(t):
    "q|k|v stacked from one buffer without a copy; one thread and all threads give the same bits."
    rng = np.random.default_rng(3)
    W = (rng.standard_normal((96, 128)) * 0.1).astype(np.float32)
    whole = as_qtensor(W, t)
    row = whole.data.size // 96
    parts = [QTensor(whole.data[a * row: b * row], t, (b - a, 128)) for a, b in ((0, 64), (64, 80), (80, 96))]
    m = FloatMatrix(*parts)
    assert np.shares_memory(m.w, whole.data) and m.shape == (96, 128)
    x = rng.standard_normal(128).astype(np.float32)
    n = set_threads(); a = m.matvec(x)
    set_threads(1); b = m.matvec(x); set_threads(n)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, FloatMatrix(whole).matvec(x))


def test_bf16_by_vdpbf16ps():
    """Where the CPU multiplies BF16 pairs (AVX512_BF16), BF16 rows a multiple of 32 wide run on `vdpbf16ps`: the
    one-token kernel (two rows side by side, each in two 256-bit halves) gives the batch tile's 512-bit sums bit for
    bit, from one step of 32 to many and from one row to many, both as float64 multiplies the BF16-rounded
    activations. Rows of another width keep the widening kernels."""
    from llmbook.floats import BF16_DOT, _matvec_bf16_dot, _matvec_bf16
    if not BF16_DOT: pytest.skip("this CPU's code has no AVX512_BF16")
    rng = np.random.default_rng(13)
    for n, n_rows, n_tokens in ((32, 5, 3), (64, 1, 2), (576, 37, 7), (2080, 13, 9), (8192, 11, 5)):
        W = (rng.standard_normal((n_rows, n)) * 0.1).astype(np.float32); X = rng.standard_normal((n_tokens, n)).astype(np.float32)
        qt = as_qtensor(W, GGMLType.BF16); m = FloatMatrix(qt)
        assert m._matvec is _matvec_bf16_dot
        batch = m.matmul(X)
        np.testing.assert_array_equal(batch, np.stack([m.matvec(x) for x in X]))
        rounded = dequantize(as_qtensor(X, GGMLType.BF16)).reshape(X.shape).astype(np.float64)
        want = rounded @ dequantize(qt).astype(np.float64).T
        # float32 sums against float64's of the same BF16 numbers: measured <= 3e-7 of the largest output here
        assert np.abs(batch - want).max() <= 2e-6 * np.abs(want).max()
    assert FloatMatrix(as_qtensor(np.zeros((3, 272), np.float32), GGMLType.BF16))._matvec is _matvec_bf16


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="multiple of"): FloatMatrix(as_qtensor(np.zeros((4, 12), np.float32), GGMLType.F16))
    with pytest.raises(NotImplementedError, match="no float kernel"): FloatMatrix(QTensor(np.zeros(34, np.uint8), GGMLType.Q8_0, (1, 32)))
    assert set(FLOAT_KERNELS) == set(TYPES)


def _avx2_only_features() -> str:
    "This CPU's features as LLVM names them, with AVX-512 and what needs it taken out: the code a real AVX2 CPU runs."
    from numba.core.codegen import get_host_cpu_features
    return ",".join("-" + f[1:] if f.startswith("+") and ("avx512" in f or f[1:] in ("evex512", "amx-tile", "amx-int8", "amx-bf16"))
                    else f for f in get_host_cpu_features().split(","))


def test_avx2_code(tmp_path):
    """The code a CPU without AVX-512 runs (AVX2's 8 lanes, the batch's three-by-four tile in 16 registers),
    made in a fresh process and cache by NUMBA_CPU_NAME=haswell and NUMBA_CPU_FEATURES without AVX-512, on any x86
    host with AVX2: a token's row of the batch is still the one-token product."""
    import os, subprocess, sys
    features = __import__("llmbook.int8", fromlist=["host_features"]).host_features()
    if "avx2" not in features: pytest.skip("no AVX2 here")
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=_avx2_only_features(), NUMBA_CACHE_DIR=str(tmp_path))
    code = """
import numpy as np
from llmbook.floats import FloatMatrix, LANES, _WIDE
from llmbook.tensors import QTensor
assert LANES == 8, LANES
rng = np.random.default_rng(3)
for n in (5 * LANES, 72 * LANES, _WIDE + 3 * LANES, _WIDE + 2 * LANES):   # odd and even vectors; pairs, then four rows at a time
    W = (rng.standard_normal((13, n)) * 0.05).astype(np.float16); X = rng.standard_normal((7, n)).astype(np.float32)
    m = FloatMatrix(QTensor.from_array(W))
    batch = m.matmul(X)
    assert np.array_equal(batch, np.stack([m.matvec(x) for x in X]))
    want = X.astype(np.float64) @ W.astype(np.float64).T
    assert np.abs(batch - want).max() <= 2e-6 * np.abs(want).max()
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
