"""Chapter 05's functions against direct formulas, over many shapes."""
import math
import numpy as np
import pytest
from llmbook.attention import (rms_norm, rope_freqs, rope_cos_sin, apply_rope, softmax, attention_mask, attention,
                               silu, gelu_tanh, swiglu, geglu_tanh)

rng = np.random.default_rng(0)

def attention_loops(q, k, v, q_pos, scale, window):
    n, H, hd = q.shape; group = H // k.shape[0]
    out = np.zeros(q.shape)
    for t in range(n):
        for h in range(H):
            js = [j for j in range(k.shape[1]) if j <= q_pos[t] and (window is None or q_pos[t] - j < window)]
            s = np.array([float(q[t, h] @ k[h // group, j]) * scale for j in js])
            p = np.exp(s - s.max()); p /= p.sum()
            out[t, h] = p @ v[h // group, js]
    return out

@pytest.mark.parametrize("H,KV", [(1, 1), (4, 4), (6, 2), (9, 3), (4, 1)])
@pytest.mark.parametrize("window", [None, 1, 3, 100])
def test_attention_matches_loops(H, KV, window):
    hd, n_keys, n = 8, 11, 4
    q = rng.standard_normal((n, H, hd)).astype(np.float32)
    k = rng.standard_normal((KV, n_keys, hd)).astype(np.float32); v = rng.standard_normal((KV, n_keys, hd)).astype(np.float32)
    pos = np.arange(n_keys - n, n_keys)
    np.testing.assert_allclose(attention(q, k, v, pos, 0.35, window), attention_loops(q, k, v, pos, 0.35, window), atol=1e-5)

def test_window_one_sees_only_itself():
    k = rng.standard_normal((1, 5, 4)).astype(np.float32); v = rng.standard_normal((1, 5, 4)).astype(np.float32)
    q = rng.standard_normal((5, 2, 4)).astype(np.float32)
    out = attention(q, k, v, np.arange(5), 1.0, window=1)
    np.testing.assert_allclose(out, np.repeat(v[0][:, None, :], 2, axis=1), atol=1e-6)

def test_gqa_rejects_uneven_groups():
    with pytest.raises(ValueError, match="grouped"):
        attention(np.zeros((1, 5, 4), np.float32), np.zeros((2, 1, 4), np.float32), np.zeros((2, 1, 4), np.float32), [0], 1.0)

def test_mask():
    m = attention_mask(np.array([2, 5]), 6, window=3)
    assert m.tolist() == [[True, True, True, False, False, False], [False, False, False, True, True, True]]

def test_softmax_is_stable():
    p = softmax(np.array([[1e4, 1e4 - 1, -np.inf]], np.float32))
    assert np.isfinite(p).all() and p[0, 2] == 0 and abs(p.sum() - 1) < 1e-6

def test_rms_norm_formula_and_zero_vector():
    x = rng.standard_normal((2, 3, 16)).astype(np.float32); w = rng.standard_normal(16).astype(np.float32)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms_norm(x, w, 1e-6), ref, rtol=1e-5, atol=1e-6)
    assert (rms_norm(np.zeros((1, 8), np.float32), np.ones(8, np.float32), 1e-5) == 0).all()

@pytest.mark.parametrize("neox", [False, True])
def test_rope_partial_rotation_and_relative_positions(neox):
    d, n_rot = 16, 8
    f = rope_freqs(n_rot, 500.0)
    x = rng.standard_normal((3, 2, d)).astype(np.float32)
    y = apply_rope(x, *rope_cos_sin([3, 4, 9], f), neox)
    np.testing.assert_array_equal(y[..., n_rot:], x[..., n_rot:])        # dims past n_rot are untouched
    q, k = x[:1], x[1:2]
    s = lambda a, b: float(np.sum(apply_rope(q, *rope_cos_sin([a], f), neox) * apply_rope(k, *rope_cos_sin([b], f), neox)))
    assert abs(s(20, 7) - s(13, 0)) < 1e-4 and abs(s(1000, 990) - s(10, 0)) < 1e-3

def test_rope_freqs_scaling_and_factors():
    base = rope_freqs(8, 10000.0)
    np.testing.assert_allclose(base, [10000.0 ** (-i / 8) for i in range(0, 8, 2)])
    np.testing.assert_allclose(rope_freqs(8, 10000.0, freq_scale=0.25), base * 0.25)
    np.testing.assert_allclose(rope_freqs(8, 10000.0, freq_factors=[1, 2, 4, 8]), base / [1, 2, 4, 8])
    with pytest.raises(ValueError): rope_freqs(7, 10000.0)
    with pytest.raises(ValueError): rope_freqs(8, 10000.0, freq_factors=[1, 2])

def test_activations():
    x = np.linspace(-30, 30, 1201).astype(np.float32)
    np.testing.assert_allclose(silu(x), [v / (1 + math.exp(-v)) for v in x.astype(np.float64)], atol=1e-5)
    np.testing.assert_allclose(gelu_tanh(x), [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)], atol=1e-3)
    g, u = rng.standard_normal(10).astype(np.float32), rng.standard_normal(10).astype(np.float32)
    np.testing.assert_allclose(swiglu(g, u), silu(g) * u); np.testing.assert_allclose(geglu_tanh(g, u), gelu_tanh(g) * u)
    assert np.isfinite(silu(np.array([-1e38, 1e38], np.float32))).all()

@pytest.mark.parametrize("neox", [False, True])
def test_rope_is_a_complex_rotation(neox):
    "Chapter 05's check, over more positions: pairs as complex numbers turned by pos * theta_i; no turn at 0; lengths kept."
    d, pos = 16, np.array([0, 1, 7, 300, 4095])
    q = rng.standard_normal((len(pos), 3, d)).astype(np.float32)
    f = rope_freqs(d, 10000.0)
    cos, sin = rope_cos_sin(pos, f)
    z = (q[..., : d // 2] + 1j * q[..., d // 2 :]) if neox else (q[..., 0::2] + 1j * q[..., 1::2])
    z = z * np.exp(1j * np.outer(pos, f))[:, None, :]
    want = np.concatenate([z.real, z.imag], -1) if neox else np.stack([z.real, z.imag], -1).reshape(q.shape)
    y = apply_rope(q, cos, sin, neox)
    np.testing.assert_allclose(y, want, atol=1e-4)
    np.testing.assert_allclose(apply_rope(q, *rope_cos_sin([0] * len(pos), f), neox), q)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5)

def test_window_mask_is_a_band():
    assert attention_mask(np.arange(12), 12, 4).sum(1).tolist() == [1, 2, 3, 4] + [4] * 8
    assert attention_mask(np.arange(12), 12).sum(1).tolist() == list(range(1, 13))
