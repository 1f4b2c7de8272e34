"""KVCache: layout, room checks that change nothing, rewind, prefix reuse, snapshots, context shift with re-roping."""
import numpy as np
import pytest
from llmbook.attention import apply_rope, rope_cos_sin, rope_freqs
from llmbook.kvcache import KVCache, KVSnapshot, ContextFullError, rerope_keys

def filled(n_ctx=10, n=6, layers=2, heads=2, hd=4, seed=0):
    rng = np.random.default_rng(seed)
    c = KVCache(layers, heads, n_ctx, hd)
    for l in range(layers):
        c.store(l, rng.standard_normal((n, heads, hd)).astype(np.float32), rng.standard_normal((n, heads, hd)).astype(np.float32))
    c.advance(np.arange(100, 100 + n))
    return c

def test_layout_agreed_with_kernels():
    c = KVCache(3, 2, 16, 8)
    assert c.k.shape == c.v.shape == (3, 2, 16, 8) and c.k.dtype == np.float32
    assert c.k.flags.c_contiguous and c.v.flags.c_contiguous and c.pos == 0 and c.n_free == 16

def test_store_writes_token_major_input_into_head_major_slots():
    c = KVCache(1, 2, 4, 3)
    k = np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3)      # (n_new, heads, hd)
    c.store(0, k, -k); c.advance([5, 6])
    assert np.array_equal(c.k[0, 1, 0], k[0, 1]) and np.array_equal(c.v[0, 0, 1], -k[1, 0])
    kk, vv = c.layer_kv(0)
    assert kk.shape == (2, 2, 3) and np.shares_memory(kk, c.k)

@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8", None])
def test_bad_sizes(bad):
    with pytest.raises(ValueError, match="positive integer"):
        KVCache(2, 2, bad, 4)

def test_max_bytes_guard():
    with pytest.raises(ValueError, match="smaller n_ctx"):
        KVCache(32, 8, 1 << 20, 128, max_bytes=1 << 30)

def test_full_cache_raises_and_changes_nothing():
    c = filled(n_ctx=8, n=6)
    k, v, t = c.k.copy(), c.v.copy(), c.tokens.copy()
    with pytest.raises(ContextFullError, match="3 new tokens do not fit.*6 of its 8"):
        c.store(0, np.ones((3, 2, 4), np.float32), np.ones((3, 2, 4), np.float32))
    with pytest.raises(ContextFullError):
        c.advance([1, 2, 3])
    assert c.pos == 6 and np.array_equal(c.k, k) and np.array_equal(c.v, v) and np.array_equal(c.tokens, t)

def test_rewind_and_reuse_prefix():
    c = filled(n=6)
    assert c.reuse_prefix([100, 101, 102, 7, 8]) == 3 and c.pos == 3
    c = filled(n=6)
    assert c.reuse_prefix(list(range(100, 106))) == 5      # identical prompt: the last token is re-run
    c = filled(n=6)
    assert c.reuse_prefix(list(range(100, 110))) == 6      # the cache is a prefix of the new prompt
    assert c.reuse_prefix([1]) == 0 and c.pos == 0 and (c.tokens == -1).all()
    with pytest.raises(ValueError): filled().rewind(7)
    with pytest.raises(ValueError): filled().rewind(-1)

def test_snapshot_restore_roundtrip_and_validation():
    c = filled(n=5)
    s = c.snapshot()
    assert isinstance(s, KVSnapshot) and s.k.shape == (2, 2, 5, 4) and not np.shares_memory(s.k, c.k)
    k_before = c.k[:, :, :5].copy()
    c.rewind(2); c.store(0, np.zeros((4, 2, 4), np.float32), np.zeros((4, 2, 4), np.float32)); c.advance([0, 0, 0, 0])
    c.restore(s)
    assert c.pos == 5 and np.array_equal(c.k[:, :, :5], k_before) and c.tokens[:5].tolist() == list(range(100, 105))
    with pytest.raises(ValueError, match="does not fit"):
        KVCache(2, 2, 4, 4).restore(s)
    with pytest.raises(ValueError, match="does not fit"):
        KVCache(1, 2, 10, 4).restore(s)

def test_shift_moves_and_reropes():
    hd, n = 8, 9
    f = rope_freqs(hd, 10000.0)
    raw = np.random.default_rng(1).standard_normal((n, 1, hd)).astype(np.float32)
    for neox in (False, True):
        c = KVCache(1, 1, n, hd)
        c.store(0, apply_rope(raw, *rope_cos_sin(np.arange(n), f), neox), raw); c.advance(np.arange(n))
        c.shift(1, 3, lambda l, k, d: rerope_keys(k, d, f, neox))
        kept = np.concatenate([raw[:1], raw[4:]])
        want = apply_rope(kept, *rope_cos_sin(np.arange(len(kept)), f), neox)
        assert c.pos == 6 and c.tokens[:6].tolist() == [0, 4, 5, 6, 7, 8] and (c.tokens[6:] == -1).all()
        np.testing.assert_allclose(c.k[0, :, :6], want.transpose(1, 0, 2), atol=1e-5)
        np.testing.assert_array_equal(c.v[0, :, :6], kept.transpose(1, 0, 2))

def test_make_room_policy():
    c = filled(n_ctx=10, n=10)
    assert c.make_room(0) == 0 and c.pos == 10
    assert c.make_room(2, n_keep=4) == 3 and c.pos == 7          # half of the 6 after the kept 4
    c = filled(n_ctx=10, n=10)
    assert c.make_room(5, n_keep=2) == 5 and c.n_free == 5       # more than half when the batch needs it
    with pytest.raises(ContextFullError, match="keeping the first 4"):
        filled(n_ctx=10, n=10).make_room(7, n_keep=4)
    with pytest.raises(ValueError):
        filled().shift(5, 2)
