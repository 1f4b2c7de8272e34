"""Sliding-window layers keep a ring of `window + n_batch` slots (chapter 06), not one slot per position: the same
logits as a cache with a slot per position, on both engines, for prompts, decode steps, rewinds and context shifts."""
import numpy as np
import pytest
from llmbook.kvcache import KVCache, ContextFullError, layer_slots, cache_bytes
from llmbook.attention_kernels import kv_storage
from llmbook.gguf import GGUFFile
from llmbook.model import Model
from llmbook.loading import load
from llmbook.testmodels import write_random_model
from llmbook.int8 import kernel_set

KERNELS = ["float", pytest.param("avx2", marks=pytest.mark.skipif(kernel_set() != "avx2", reason="no AVX2 here"))]

def test_layer_slots_and_bytes():
    assert layer_slots(4096, 0) == 4096 and layer_slots(4096, 512) == 1024 and layer_slots(4096, 512, n_batch=64) == 576
    assert layer_slots(1000, 512) == 1000                      # a ring only where it is smaller than the context
    w = [0 if (l + 1) % 6 == 0 else 512 for l in range(18)]   # Gemma 3 270M
    assert cache_bytes(1, 32768, 256, w) == 2 * 4 * 256 * (3 * 32768 + 15 * 1024)
    c = KVCache(18, 1, 32768, 256, windows=w)
    assert c.nbytes == cache_bytes(1, 32768, 256, w) and c.k.shape[0] == 3 and c.k_ring.shape == (15, 1, 1024, 256)
    with pytest.raises(ValueError, match="windows"): KVCache(2, 1, 100, 8, windows=[0])
    with pytest.raises(ValueError, match="MiB"): KVCache(18, 1, 32768, 256, windows=w, max_bytes=2**20)

def test_ring_store_gather_and_limits():
    rng = np.random.default_rng(0)
    c = KVCache(2, 1, 1000, 4, windows=[0, 50], n_batch=20)     # layer 1: a ring of 70 slots
    assert c.ring_slots == 70 and c.layers[1][0] is c.k_ring
    keys = rng.standard_normal((300, 1, 4)).astype(np.float32)
    for s in range(0, 300, 20):
        for layer in (0, 1): c.store(layer, keys[s:s + 20], -keys[s:s + 20])
        c.advance(range(s, s + 20))
    k, v = c.layer_kv(1, 300, 251)                              # the window of position 300: gathered in order
    np.testing.assert_array_equal(k[0], keys[251:300, 0]); np.testing.assert_array_equal(v[0], -keys[251:300, 0])
    np.testing.assert_array_equal(c.layer_kv(0, 300)[0][0], keys[:, 0])
    with pytest.raises(ValueError, match="not all there"): c.layer_kv(1, 300, 100)
    with pytest.raises(ValueError, match="ring for at most 20"): c.store(1, keys[:21], keys[:21])
    c.store(0, keys[:21], keys[:21])                            # a full layer takes any batch that fits

def test_ring_rewind_snapshot_shift():
    c = KVCache(1, 1, 1000, 4, windows=[50], n_batch=20)
    for s in range(0, 300, 20): c.store(0, np.full((20, 1, 4), s, np.float32), np.zeros((20, 1, 4), np.float32)); c.advance(range(s, s + 20))
    assert c.ring_floor == 300 - 70
    snap = c.snapshot()
    assert c.can_keep(290) and not c.can_keep(200)
    assert c.rewind(290) == 290 and c.pos == 290
    assert c.reuse_prefix(list(range(150)) + [7, 7]) == 0 and c.pos == 0 and c.ring_floor == 0   # dropped: run again
    c.restore(snap)
    assert c.pos == 300 and c.ring_floor == 230 and c.tokens[299] == 299
    with pytest.raises(ContextFullError, match="no longer hold"): c.shift(190, 100)   # would keep 151..189, which the ring dropped
    assert c.pos == 300                                                                # ... and changed nothing
    c.shift(0, 100)
    assert c.pos == 200 and c.ring_floor == 130 and c.tokens[199] == 299

def _pair(path, kernels):
    return load(path, kernels=kernels) if kernels else Model(GGUFFile(path))

@pytest.mark.parametrize("kernels", [None] + KERNELS)
def test_model_with_rings_matches_a_slot_per_position(tmp_path, kernels):
    path = write_random_model(tmp_path / "g3.gguf", "gemma3", n_layers=7, sliding_window=6, n_vocab=100)
    m = _pair(path, kernels)
    c = m.config
    # The kernels sum every output in an order fixed by the output (chapter 16): ring and flat give the same bits.
    # The numpy reference (None) hands its products to BLAS, whose order follows the shapes: 1e-4, measured 2e-6.
    same = np.testing.assert_array_equal if kernels else (lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4))
    assert m.windows() == [6 if l in c.local_layers else 0 for l in range(7)] and any(m.windows())
    ids = np.random.default_rng(1).integers(0, 100, 230)
    flat = KVCache(7, c.n_kv_heads, 240, c.head_dim, windows=m.windows())              # rings of 518 > 240: none
    ring = KVCache(7, c.n_kv_heads, 240, c.head_dim, windows=m.windows(), n_batch=16)  # rings of 22 slots
    assert flat.ring_slots == 0 and ring.ring_slots == 22
    a, b = m.forward(ids[:200], flat), m.forward(ids[:200], ring)                      # the ring's prompt: 13 passes
    same(b, a)
    same(m.forward(ids[:200], KVCache(7, c.n_kv_heads, 240, c.head_dim, windows=m.windows(), n_batch=16), n_out=3),
         a[-3:])                                                                        # n_out across the last passes
    for t in ids[200:210]:                                                              # decode over the ring
        same(m.forward([t], ring), m.forward([t], flat))
    assert ring.rewind(205) == 205 and flat.rewind(205) == 205                         # a short rewind keeps the ring
    same(m.forward(ids[205:215], ring), m.forward(ids[205:215], flat))
    for cache in (ring, flat): cache.shift(2, 100, m.rotate_keys)                       # a context shift moves the rings
    same(m.forward(ids[:5], ring), m.forward(ids[:5], flat))

@pytest.mark.parametrize("cache_type", ["f16", "q8_0"])
def test_rings_of_every_storage_on_the_kernels(tmp_path, cache_type):
    "Chapter 14's storages in rings of window + n_batch slots (wraps inside the kernel's tiles): ring = flat, bit for bit."
    m = load(write_random_model(tmp_path / "g3.gguf", "gemma3", n_layers=7, sliding_window=6, head_dim=32), kernels="float")
    c, ids, s = m.config, np.random.default_rng(2).integers(0, 100, 120), kv_storage(cache_type)
    flat = KVCache(7, c.n_kv_heads, 128, c.head_dim, windows=m.windows(), cache_type=s)
    ring = KVCache(7, c.n_kv_heads, 128, c.head_dim, windows=m.windows(), n_batch=7, cache_type=s)    # 13 slots
    assert ring.ring_slots == 13 and ring.k_ring.dtype == s.dtype
    np.testing.assert_array_equal(m.forward(ids[:100], ring, n_out=100), m.forward(ids[:100], flat, n_out=100))
    for t in ids[100:110]: np.testing.assert_array_equal(m.forward([t], ring), m.forward([t], flat))

def test_model_refuses_a_cache_with_other_windows(tmp_path):
    m = Model(GGUFFile(write_random_model(tmp_path / "g3.gguf", "gemma3", n_layers=7, sliding_window=6)))
    with pytest.raises(ValueError, match="sliding windows"): m.forward([1, 2], KVCache(7, m.config.n_kv_heads, 64, m.config.head_dim))
