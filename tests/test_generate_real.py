"""Greedy generation on the real models against llama.cpp (tests/fixtures/greedy_*.json, made by
tools/make_greedy_fixtures.py): the same tokens up to the first step where llama.cpp's top-2 margin is under 0.5,
and the same text as llama.cpp prints for them."""
import pytest
from conftest import load_fixture
from llmbook.loading import load

MAX_STEPS = 24        # every clear step of the fixtures


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def model_and_cases(request):
    path = request.getfixturevalue(f"{request.param}_path")
    cases = load_fixture(f"greedy_{request.param}.json")["cases"]
    assert len(cases) >= 6 and sum(c["n_clear"] for c in cases) >= 40
    return load(path, n_ctx=1024), cases


def test_greedy_matches_llamacpp(model_and_cases):
    m, cases = model_and_cases
    for case in cases:
        n = min(case["n_clear"], MAX_STEPS)
        want = case["cont"][:n]
        assert not any(m.tokenizer.is_eog(t) for t in want)       # (else generation would rightly stop early)
        c = m.generate(case["ids"], max_tokens=n, temperature=0.0, seed=0)
        assert c.tokens == want, case["prompt"]
        # the text: the pieces joined, leading space kept, as llama.cpp prints them
        assert str(c) == m.tokenizer.decode_bytes(want).decode("utf-8", "replace")
        if n == case["n_clear"]: assert str(c) == case["text"]


def test_chat_smollm2(smollm2_path):
    m = load(smollm2_path)
    msgs = [{"role": "user", "content": "What is the capital of Japan?"}]
    assert m.tokenizer.decode(m.chat_prompt(msgs), special=True).startswith(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n")
    assert "Tokyo" in m.chat(msgs, max_tokens=8)
