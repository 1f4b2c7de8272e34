"""One answer (chapter 16): a token's logits are the same bits whatever the batch, the chunk, the cache layout or a
reused prefix, through the public API, on every kernel set this CPU runs. Asserted exactly: the kernels sum every
output element in an order fixed by the element itself (its row's blocks in order, its keys in segments at absolute
positions), never by the batch it came in."""
import sys
from pathlib import Path
import numpy as np
import pytest
import llmbook
from llmbook.gguf import GGUFFile
from llmbook.kvcache import KVCache
from llmbook.int8 import kernel_set
from llmbook.testmodels import write_random_model
from conftest import smollm2_file, gemma3_file

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import write_family_model

KERNELS = [pytest.param("avx2", marks=pytest.mark.skipif(kernel_set() != "avx2", reason="this CPU has no AVX2")), "float"]
TEXT = (Path(__file__).parent.parent / "README.md").read_text()     # real text: clear choices and flat ones alike


def load(path, kernels):
    return llmbook.load(path, n_threads=2, kernels=kernels, deterministic=True)


def last_logits(m, ids, chunks):
    "The last position's logits after feeding `ids` to a fresh session in pieces of the sizes `chunks`."
    s, i = m.session(), 0
    for c in chunks:
        last = s.extend(ids[i:i + c]); i += c
    assert i == len(ids)
    return last


def sizes(n, k): return [k] * (n // k) + ([n % k] if n % k else [])


def check_one_answer(m, ids):
    n = len(ids)
    every = m.logits(ids)                                       # one batch, all positions
    s, steps = m.session(), []
    for t in ids: steps.append(s.extend([t]))                   # one token at a time: every position
    np.testing.assert_array_equal(np.stack(steps), every)
    for name, chunks in (("one batch", [n]), ("chunks of 7", sizes(n, 7)), ("chunks of 64", sizes(n, 64))):
        np.testing.assert_array_equal(last_logits(m, ids, chunks), every[-1], err_msg=name)
    s = m.session()
    s.extend(ids[: n // 2] + [5, 6, 7])                         # another prompt sharing a prefix, then this one
    assert s.reuse_prefix(ids) == n // 2
    np.testing.assert_array_equal(s.extend([]), every[-1], err_msg="a reused prefix")


@pytest.mark.parametrize("kernels", KERNELS)
def test_smollm2_one_answer(kernels):
    if smollm2_file() is None: pytest.fail("SmolLM2 is not installed (tools/setup.sh --dev)")
    m = load(None, kernels)
    check_one_answer(m, m.tokenizer.encode(TEXT)[:300])


@pytest.mark.parametrize("kernels", KERNELS)
def test_gemma3_one_answer_past_its_window(kernels):
    path = gemma3_file()
    if path is None: pytest.fail("Gemma 3 270M is not installed (tools/setup.sh --dev)")
    m = load(path, kernels)
    ids = m.tokenizer.encode(TEXT)[:600]                        # past the 512-key window of its local layers
    assert len(ids) == 600 and 0 < min(w for w in m.windows() if w) < 600
    check_one_answer(m, ids)


@pytest.mark.parametrize("kernels", KERNELS)
def test_q4_k_m_one_answer(tmp_path, kernels):
    "A llama-family Q4_K_M file: Q4_K repacked 8 rows interleaved, Q6_K read in place."
    path = write_family_model(tmp_path / "llama.gguf", arch="llama", wtype="Q4_K_M", n_layers=2, n_embd=256, n_heads=4,
                              n_kv_heads=2, n_ff=512, n_vocab=512, seed=15)
    types = {t.type for t in GGUFFile(path).tensors.values()}
    assert {"Q4_K", "Q6_K"} <= types
    m = load(path, kernels)
    check_one_answer(m, np.random.default_rng(0).integers(0, 512, 200).tolist())


@pytest.mark.parametrize("wtype", ["F16", "BF16", "F32"])
@pytest.mark.parametrize("kernels", KERNELS)
def test_float_weights_one_answer(tmp_path, kernels, wtype):
    "Float weights: with the avx2 set, chapter 13's float kernels (one token and a batch in one order, by construction)."
    path = write_family_model(tmp_path / "llama.gguf", arch="llama", wtype=wtype, n_layers=2, n_embd=256, n_heads=4,
                              n_kv_heads=2, n_ff=512, n_vocab=512, seed=16)
    assert GGUFFile(path).tensors["blk.0.attn_q.weight"].type == wtype
    m = load(path, kernels)
    if kernels == "avx2": assert type(m.engine.layers[0].qkv.parts[0][0]).__name__ == "FloatMatrix"
    check_one_answer(m, np.random.default_rng(0).integers(0, 512, 150).tolist())


@pytest.mark.parametrize("kernels", KERNELS)
def test_ring_cache_equals_a_slot_per_position(tmp_path, kernels):
    "A sliding-window layer's ring of slots against a slot per position: the same bits, pass by pass."
    path = write_random_model(tmp_path / "g3.gguf", "gemma3", n_layers=7, sliding_window=6, n_vocab=100)
    m = load(path, kernels)
    c, ids = m.config, np.random.default_rng(1).integers(0, 100, 230)
    flat = KVCache(7, c.n_kv_heads, 240, c.head_dim, windows=m.windows())               # rings of 518 > 240: none
    ring = KVCache(7, c.n_kv_heads, 240, c.head_dim, windows=m.windows(), n_batch=16)   # rings of 22 slots, 13 passes
    assert flat.ring_slots == 0 and ring.ring_slots == 22
    np.testing.assert_array_equal(m.forward(ids[:200], ring, n_out=200), m.forward(ids[:200], flat, n_out=200))
    for t in ids[200:230]:
        np.testing.assert_array_equal(m.forward([t], ring), m.forward([t], flat))


def test_deterministic_is_the_default_where_it_is_free():
    if smollm2_file() is None: pytest.fail("SmolLM2 is not installed (tools/setup.sh --dev)")
    if kernel_set() == "avx2": assert llmbook.load(kernels="avx2").engine.deterministic
    assert not llmbook.load(kernels="float").engine.deterministic      # it costs decode speed there (16)
    assert llmbook.load(kernels="float", deterministic=True).engine.deterministic
