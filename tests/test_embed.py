"""Embeddings (issue 27): `LLM.embed` against llama.cpp's own (tests/fixtures/embeddings_*.json, made by
tools/make_embedding_fixtures.py with llama-cpp-python), on SmolLM2 and Gemma 3, mean and last pooling."""
import numpy as np
import pytest
import llmbook
from llmbook.generate import LLM
from llmbook.serve import embed, pooling_of, _pool_hidden as pool_hidden
from llmbook.gguf import GGUFFile
from llmbook.kvcache import ContextFullError
from conftest import load_fixture

BAR = 0.999


def bar_for(rows) -> float:
    """0.999, or lower where llama.cpp does not agree with itself that closely: its embeddings with an f32 KV cache
    against its default f16 cache (`self_cosine`, recorded with the fixture) measure its own spread; we allow 1.5x that
    spread (Gemma 3's last-token states: llama.cpp's two runs differ down to 0.99815)."""
    return min(BAR, 1 - 1.5 * (1 - min(r["self_cosine"] for r in rows)))


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def case(request):
    path = request.getfixturevalue(f"{request.param}_path")
    return request.param, llmbook.load(str(path), n_ctx=512), load_fixture(f"embeddings_{request.param}.json")


@pytest.mark.parametrize("how", ["mean", "last"])
def test_embeddings_match_llama_cpp(case, how):
    name, m, fx = case
    rows = fx["poolings"][how]
    for text, row in zip(fx["texts"], rows):            # the same tokens as llama.cpp's embed
        assert m.tokenizer.encode(text, add_special=True, parse_special=False) == row["ids"]
    E = embed(m, fx["texts"], pooling=how)
    ref = np.array([r["embedding"] for r in rows], dtype=np.float64)
    cos = (E * ref).sum(1) / np.linalg.norm(ref, axis=1)
    print(name, how, np.round(cos, 5), "bar", round(bar_for(rows), 5))
    assert E.shape == ref.shape and E.dtype == np.float32
    assert np.allclose(np.linalg.norm(E, axis=1), 1, atol=1e-5)
    assert cos.min() >= bar_for(rows), cos
    # token ids in, the same vectors out
    assert np.array_equal(embed(m, [r["ids"] for r in rows], pooling=how), E)


def test_reference_engine_agrees(smollm2_path):
    "Part I's numpy engine: the same vectors as the kernels up to their rounding of activations to 8 bits."
    fx = load_fixture("embeddings_smollm2.json")
    ref_model, fast = LLM(GGUFFile(str(smollm2_path)), n_ctx=64), llmbook.load(str(smollm2_path), n_ctx=64)
    a, b = embed(ref_model, fx["texts"][:2]), embed(fast, fx["texts"][:2])
    cos = (a * b).sum(1)
    llama = np.array([r["embedding"] for r in fx["poolings"]["mean"][:2]])
    print("reference vs kernels", cos, "reference vs llama.cpp", (a * llama).sum(1) / np.linalg.norm(llama, axis=1))
    # the reference computes in float32 throughout; llama.cpp and the kernels round each product's input to 8 bits:
    # measured 0.9988-0.9998 against llama.cpp (the first text's BOS-free mean leans on its first token)
    assert cos.min() > 0.998 and ((a * llama).sum(1) / np.linalg.norm(llama, axis=1)).min() > 0.998


def test_inputs_and_refusals(smollm2_path):
    m = llmbook.load(str(smollm2_path), n_ctx=32)
    one = embed(m, "The cat sat on the mat.")
    assert one.shape == (1, m.config.n_embd)
    assert np.array_equal(embed(m, ["The cat sat on the mat."]), one)
    assert pooling_of(m) == "mean"                          # SmolLM2's file names no pooling type
    raw = embed(m, "The cat sat on the mat.", normalize=False)
    assert np.allclose(raw / np.linalg.norm(raw), one, atol=1e-6) and np.linalg.norm(raw) > 2
    with pytest.raises(ValueError, match="cls"): embed(m, "x", pooling="cls")      # SmolLM2 puts no BOS before a text
    with pytest.raises(ValueError, match="pooling"): embed(m, "x", pooling="max")
    with pytest.raises(ValueError, match="empty"): embed(m, "")
    with pytest.raises(ContextFullError, match="context"):
        embed(m, "word " * 40)
    with pytest.raises(ValueError, match="out of range"): embed(m, [[1, 2, 10**7]])
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(pool_hidden(h, "mean"), h.mean(0)) and np.array_equal(pool_hidden(h, "last"), h[2]) and np.array_equal(pool_hidden(h, "cls"), h[0])
