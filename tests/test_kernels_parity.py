"""The kernels end to end: bench/decode_smollm2.py's minimal llama forward pass, built only from llmbook.packed,
against llama.cpp's logits for SmolLM2 (teacher-forced, the criteria of tests/test_model_parity.py)."""
import sys
from pathlib import Path
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


def test_kernel_forward_matches_llama_cpp(smollm2_path):
    import decode_smollm2 as D
    model = D.TinyLlama(smollm2_path)
    r = D.check_against_llama_cpp(model)
    agree, clear = map(int, r["top1_agreement"].split("/"))
    assert clear >= 100 and agree / clear >= 0.99, r
    assert r["min_full_logit_cosine"] >= 0.995, r
    assert r["top20_centred_diff_mean"] < 0.4 and r["top20_centred_diff_max"] < 1.0, r   # llama.cpp's int8 activations


def test_decode_matches_prefill(smollm2_path):
    "Token by token through the KV cache gives the logits of one batched pass (decode path vs prefill path)."
    import decode_smollm2 as D
    model = D.TinyLlama(smollm2_path, n_ctx=64)
    ids = [504, 3575, 282, 4649, 314, 7042, 30]
    batched = model.forward(ids, 0, all_logits=True).copy()
    for pos, tok in enumerate(ids):
        step = model.forward([tok], pos)[0]
        np.testing.assert_allclose(step, batched[pos], rtol=1e-3, atol=2e-3)


@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("n_rot,head_dim", [(64, 64), (256, 256), (32, 64)])
def test_bench_rope_matches_chapter_05(neox, n_rot, head_dim):
    "The minimal forward pass's own RoPE kernel against chapter 05's apply_rope (both pairings, partial rotation)."
    import decode_smollm2 as D
    from llmbook.attention import rope_freqs, rope_cos_sin, apply_rope
    rng = np.random.default_rng(1)
    cos, sin = rope_cos_sin(np.arange(100), rope_freqs(n_rot, 10000.0))
    x = rng.standard_normal((5, 3, head_dim)).astype(np.float32)
    got = x.copy()
    D.rope(got, 40, cos, sin, neox)
    np.testing.assert_allclose(got, apply_rope(x, cos[40:45], sin[40:45], neox=neox), rtol=1e-5, atol=1e-5)


def test_bench_add():
    import decode_smollm2 as D
    x, d = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32)
    h = x.copy(); D.add(h, d)
    np.testing.assert_array_equal(h, x + d)
