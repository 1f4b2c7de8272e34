"""The KV cache in f16 (issue 25, `cache_type="f16"`): llama.cpp's default, half the memory of float32, one answer on every
path. Chapter 14's storage (`kv_storage("f16")`) keeps each number's 16 bits; `llmbook.load` takes its name."""
import subprocess, sys
import numpy as np
import pytest
import llmbook
from llmbook.kvcache import KVCache, cache_bytes
from llmbook.attention_kernels import tiled_attention, kv_storage, F16Storage

def test_f16_halves_the_memory():
    s = kv_storage("f16")
    f16, f32 = KVCache(4, 2, 1000, 64, windows=[0, 128, 0, 128], cache_type=s), KVCache(4, 2, 1000, 64, windows=[0, 128, 0, 128])
    assert isinstance(s, F16Storage) and f16.cache_type == "f16" and "f16" in repr(f16)
    assert f16.k.dtype == np.uint16 and f32.k.dtype == np.float32 and f16.nbytes * 2 == f32.nbytes   # f16's bits: numba's type
    assert cache_bytes(2, 1000, 64, [0, 128, 0, 128], cache_type=s) == f16.nbytes
    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    np.testing.assert_array_equal(s.decode(s.encode(x)), x.astype(np.float16))          # numpy's rounding, viewed back
    assert llmbook.load(n_ctx=64, cache_type="f32").new_cache().nbytes == 2 * llmbook.load(n_ctx=64).new_cache().nbytes   # f16: load's default
    with pytest.raises(ValueError, match="unknown KV cache type 'q4'"): KVCache(1, 1, 8, 8, cache_type="q4")
    with pytest.raises(ValueError, match="unknown KV cache type 'q4': one of f32, f16, q8_0"): kv_storage("q4")

@pytest.mark.parametrize("pos0, n, window", [(20, 1, 0), (450, 200, 0), (600, 1, 128), (0, 300, 0), (500, 7, 96)])
def test_attention_over_f16_bits_is_attention_over_the_rounded_values(pos0, n, window):
    """The kernels widen an f16 cache's bits exactly: the same values as the rounded keys held as float32, to float32
    rounding. Not always the same bits: the two cache types are two compilations of the kernel, and LLVM may vectorize
    `_dots` (fastmath) differently in each (a fresh compile on the AVX-512 EPYC differed by at most 2.6e-7 relative)."""
    rng = np.random.default_rng(pos0 + n)
    K, V = (rng.standard_normal((2, 3, 700, 64)).astype(np.float16) for _ in "kv")
    q = rng.standard_normal((n, 9, 64)).astype(np.float32)
    bits, floats = np.empty_like(q), np.empty_like(q)
    tiled_attention(q, K.view(np.uint16), V.view(np.uint16), 1, pos0, 0.125, window, bits)
    tiled_attention(q, K.astype(np.float32), V.astype(np.float32), 1, pos0, 0.125, window, floats)
    np.testing.assert_allclose(bits, floats, rtol=0, atol=1e-5 * np.abs(floats).max())   # 40x the spread measured

@pytest.fixture(scope="module")
def ids():
    return [1, 504, 1296, 3003, 4683, 359, 30, 2000] * 12

@pytest.mark.parametrize("kernels", ["avx2", "float"])
def test_one_answer_and_the_same_rounding_as_the_reference(ids, kernels):
    """With an f16 cache the fast engine still gives one answer (batch = token by token, bit for bit), and writes the
    keys the numpy reference writes: the fast f16 and f32 caches differ from each other by about what the reference's
    do (the rounding of the keys), not more."""
    if kernels == "avx2" and llmbook.int8.kernel_set() != "avx2": pytest.skip("no AVX2 on this CPU")
    m16, m32 = (llmbook.load(n_ctx=128, kernels=kernels, deterministic=True, cache_type=t) for t in ("f16", "f32"))
    batch = m16.logits(ids)
    s = m16.session()
    steps = [s.extend(ids[:80])] + [s.extend([t]) for t in ids[80:]]
    np.testing.assert_array_equal(np.stack(steps), batch[79:])
    ref16, ref32 = (llmbook.Model(m16.gguf, 128, cache_type=kv_storage(t)).logits(ids) for t in ("f16", "f32"))
    fast32 = m32.logits(ids)
    fast_gap, ref_gap = np.abs(batch - fast32).max(), np.abs(ref16 - ref32).max()
    if kernels == "float":
        # float kernels: the fast pair and the reference pair round the same keys, and their gaps agree within a
        # factor measured here on SmolLM2 (about 1x): 3x leaves room, a wrong conversion is off by far more
        assert 0 < fast_gap < 3 * ref_gap, (fast_gap, ref_gap)
    else:
        # int8 kernels round the activations, so any change (here the keys' rounding) can flip roundings downstream:
        # the f16/f32 gap is then of the size of the int8 kernels' own gap to the float32 reference (both ~1.6 on
        # SmolLM2, measured here); twice that leaves room, a wrong conversion gives garbage logits
        assert 0 < fast_gap < 2 * np.abs(fast32 - ref32).max(), (fast_gap, np.abs(fast32 - ref32).max())
    assert (batch.argmax(-1) == fast32.argmax(-1)).mean() > 0.9

def test_cli_cache_type(tmp_path):
    out = subprocess.run([sys.executable, "-m", "llmbook.cli", "generate", "--cache-type", "f32", "-n", "4", "--temperature", "0",
                          "The capital of France is"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr
    bad = subprocess.run([sys.executable, "-m", "llmbook.cli", "generate", "--cache-type", "q9", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--cache-type" in bad.stderr
