"""Speculative decoding (issue 38, chapter 16): with guesses the tokens are those without, exactly.

Prompt lookup and a draft model on the real SmolLM2, greedy and seeded, with grammars, stop strings, logit bias,
penalties and ignore_eos; a stream closed early and a full context leave the session as without guesses; a draft
of another vocabulary is refused; the CLI's and the server's flags give the same text as without them."""
import json, subprocess, sys, threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pytest

import llmbook as lb
from llmbook.speculative import PromptLookup, DraftModel, Speculator, speculator
from llmbook.testmodels import write_random_chat_model
from conftest import serve_process

DOC = ("Order 1042: 3 x red mug, 2 x blue plate, 1 x green bowl. Ship to: 14 Harbour Street, Leith, Edinburgh. "
       "Order 1043: 5 x yellow cup, 1 x red mug. Ship to: 2 Mill Lane, Bath.")
PROMPTS = [f"Copy the first order exactly.\n\n{DOC}",
           "Write the numbers from 1 to 30, separated by commas.",
           'Rewrite as JSON with keys "name" and "city": Ada Lovelace lives in London.',
           "def add(a, b):\n    return a + b\n\nRename add to plus and repeat the code.",
           "Tell me about the sea.",
           "Repeat three times: the quick brown fox jumps over the lazy dog."]
SETTINGS = [dict(temperature=0.0), dict(temperature=0.8, seed=3), dict(temperature=1.0, seed=11, top_k=0, top_p=1.0, min_p=0.0),
            dict(temperature=0.7, seed=5, repeat_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.3)]


@pytest.fixture(scope="module")
def m():
    return lb.load(n_threads=2)


@pytest.fixture(scope="module")
def draft(smollm2_path):
    return lb.load(smollm2_path, n_threads=2, cache_type="f32")   # the same weights, another cache: agrees nearly always


def chat(m, text):
    return m.chat_prompt([{"role": "user", "content": text}])


@pytest.mark.parametrize("kw", SETTINGS, ids=["greedy", "seeded", "seeded-wide", "penalties"])
def test_lookup_gives_the_same_tokens(m, kw):
    drafted = 0
    for p in PROMPTS:
        plain = m.generate(chat(m, p), max_tokens=40, **kw)
        fast = m.generate(chat(m, p), max_tokens=40, draft="lookup", **kw)
        assert fast.tokens == plain.tokens and str(fast) == str(plain) and fast.stop_reason == plain.stop_reason, p
        st = fast.speculation
        assert st["accepted"] <= st["drafted"] and st["passes"] + st["accepted"] >= len(fast.tokens) - 1
        drafted += st["drafted"]
    assert drafted > 0                                      # the guesser did guess


@pytest.mark.parametrize("n_draft", [1, 3, 8])
def test_a_draft_model_gives_the_same_tokens(m, draft, n_draft):
    accepted = 0
    for p in PROMPTS[:4]:
        for kw in SETTINGS[:2]:
            plain = m.generate(chat(m, p), max_tokens=32, **kw)
            fast = m.generate(chat(m, p), max_tokens=32, draft=draft, n_draft=n_draft, **kw)
            assert fast.tokens == plain.tokens, (p, kw)
            accepted += fast.speculation["accepted"]
    assert accepted > 0


def test_grammar_stop_bias_and_logprobs_are_unchanged(m):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}, "required": ["name", "city"]}
    g = lb.as_grammar(json_schema=schema)
    for kw in (dict(grammar=g), dict(grammar=g, temperature=0.9, seed=2), dict(stop=["7"]),
               dict(logit_bias={11: -5.0, 28: 3.0}, temperature=0.6, seed=9), dict(logprobs=3, temperature=0.5, seed=1),
               dict(ignore_eos=True, max_tokens=60)):
        kw = {"max_tokens": 40, **kw}
        for p in PROMPTS[1:3]:
            plain = m.generate(chat(m, p), **kw)
            fast = m.generate(chat(m, p), draft="lookup", n_draft=6, **kw)
            assert fast.tokens == plain.tokens and str(fast) == str(plain) and fast.stop_reason == plain.stop_reason
            assert fast.logprobs == plain.logprobs
    assert json.loads(str(m.generate(chat(m, PROMPTS[2]), max_tokens=60, grammar=g, draft="lookup")))


def test_gemma3_rings_take_the_guesses_back(gemma3_path):
    "Gemma 3's sliding-window layers keep their keys in rings: a pass of guesses past the window, then taken back."
    g = lb.load(gemma3_path, n_threads=2, n_ctx=2048)
    text = " ".join(f"Item {i}: a red box, a blue box." for i in range(120))    # past the 512-token window
    for kw in (dict(), dict(temperature=0.8, seed=1)):
        plain = g.generate(text, max_tokens=48, ignore_eos=True, **kw)
        fast = g.generate(text, max_tokens=48, ignore_eos=True, draft="lookup", **kw)
        assert fast.tokens == plain.tokens and fast.speculation["accepted"] > 0


def test_streams_and_sessions_keep_what_they_would_without(m):
    for kw in (dict(), dict(draft="lookup")):
        s = m.session(512)
        pieces = list(s.generate(chat(m, PROMPTS[1]), max_tokens=24, stream=True, **kw))
        states = [(s.tokens, s.cache.pos, list(s.pending))]
        stream = s.generate(" And again:", max_tokens=30, stream=True, **kw)
        got = [next(stream) for _ in range(6)]; stream.close()
        states.append((s.tokens, s.cache.pos, list(s.pending)))
        s.chat("Thanks. Now count down from 5.", max_tokens=20, **kw)
        states.append((s.tokens, s.cache.pos, list(s.pending)))
        if not kw: plain = (pieces, got, states)
    assert (pieces, got, states) == plain                   # no guess is left in the cache, whatever ended the reply


def test_a_full_context_ends_as_without_guesses(m):
    ids = m.tokenizer.encode("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,", add_special=False)
    for n_ctx in (len(ids) + 1, len(ids) + 5, len(ids) + 23):
        out = []
        for kw in (dict(), dict(draft="lookup", n_draft=8)):
            s = m.session(n_ctx)
            c = s.generate(ids, max_tokens=None, ignore_eos=True, **kw)
            out.append((c.tokens, c.stop_reason, s.cache.pos, s.pending))
        assert out[0] == out[1] and out[0][1] == "context"


def test_guessers_and_refusals(m, tmp_path):
    class T:
        def __init__(self, t): self.tokens = t
    assert PromptLookup().guess(T([5, 6, 7, 8, 9, 1, 2, 6, 7]), 4) == [8, 9, 1, 2]
    assert PromptLookup().guess(T([1, 2, 3, 1, 2, 4, 9, 1, 2]), 2) == [4, 9]     # the latest match
    assert PromptLookup().guess(T([4, 1, 2, 3, 9, 9, 2, 3]), 3) == [9, 9, 2]      # the longest n first
    assert PromptLookup().guess(T([5, 6, 7]), 4) == []
    tiny = lb.load(write_random_chat_model(tmp_path / "a.gguf"), n_threads=1)
    other = lb.load(write_random_chat_model(tmp_path / "b.gguf", alphabet=range(40, 127)), n_threads=1)
    with pytest.raises(ValueError, match="is not the target's"): tiny.generate([1, 2], max_tokens=3, draft=other)
    for bad in ("magic", 3, None.__class__):
        with pytest.raises(ValueError, match="draft="): m.generate("Hi", max_tokens=2, draft=bad)
    with pytest.raises(ValueError, match="n_draft"): m.generate("Hi", max_tokens=2, draft="lookup", n_draft=-1)
    with pytest.raises(ValueError, match="deterministic"):
        speculator(lb.load(n_threads=1, kernels="float"), "lookup")
    assert m.generate("Hi", max_tokens=5, draft="lookup", n_draft=0).speculation["drafted"] == 0


def test_tiny_models_with_wrong_guesses_everywhere(tmp_path):
    "A random draft for a random target: nearly every guess is wrong, and every rejection path runs."
    target = lb.load(write_random_chat_model(tmp_path / "t.gguf", seed=1), n_threads=1)
    other = lb.load(write_random_chat_model(tmp_path / "d.gguf", seed=2), n_threads=1)
    rng = np.random.default_rng(0)
    for i in range(20):
        ids = rng.integers(0, 99, rng.integers(1, 12)).tolist()
        kw = dict(temperature=float(rng.choice([0.0, 0.9])), seed=i, max_tokens=int(rng.integers(1, 40)), ignore_eos=True)
        plain = target.generate(ids, **kw)
        for draft in ("lookup", other, Speculator(PromptLookup(1, 1), 3, adapt=False), Speculator(PromptLookup(), 6, n_min=4)):
            assert target.generate(ids, draft=draft, **kw).tokens == plain.tokens


def test_the_cli_flags(smollm2_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "llmbook.cli", "generate", "-m", str(smollm2_path), "-n", "24",
                                     "-t", "2", *a, "List the days of the week, comma separated."],
                                    capture_output=True, text=True, timeout=600)
    plain, ngram, drafted = run(), run("--spec-type", "ngram", "--draft-max", "4", "-v"), run("-md", str(smollm2_path), "--draft-max", "3", "-v")
    assert plain.returncode == ngram.returncode == drafted.returncode == 0, (ngram.stderr, drafted.stderr)
    assert plain.stdout == ngram.stdout == drafted.stdout
    assert "guesses accepted" in ngram.stderr and "guesses accepted" in drafted.stderr
    bad = run("--draft-min", "5", "--draft-max", "2", "--spec-type", "ngram")
    assert bad.returncode != 0 and "--draft-min" in bad.stderr and "Traceback" not in bad.stderr
    bench = subprocess.run([sys.executable, "-m", "llmbook.cli", "bench", "-m", str(smollm2_path), "-t", "2", "--repeat", "1",
                            "--gen-tokens", "24", "--spec-type", "ngram", "--json"], capture_output=True, text=True, timeout=600)
    r = json.loads(bench.stdout)
    assert r["spec_type"] == "ngram" and 0 <= r["spec_accepted"] <= 1 and r["spec_tokens_per_pass"] >= 1 and r["spec_decode"] > 0


openai = pytest.importorskip("openai", reason="the server tests need the dev extras (openai, httpx, fastapi, uvicorn)")
httpx = pytest.importorskip("httpx")


def test_the_server_with_lookup_gives_each_answer_as_without():
    reqs = [dict(messages=[{"role": "user", "content": p}], max_tokens=32, **kw) for p in PROMPTS[:4]
            for kw in (dict(temperature=0.0), dict(temperature=0.8, seed=4))]
    def answers(url, together):
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
        ask = lambda r: client.chat.completions.create(model="x", **r).choices[0].message.content
        if not together: return [ask(r) for r in reqs]
        with ThreadPoolExecutor(4) as ex: return list(ex.map(ask, reqs))
    with serve_process("--parallel", 2, "--n-ctx", 512, "--threads", 2) as url: plain = answers(url, False)
    with serve_process("--parallel", 3, "--n-ctx", 512, "--threads", 2, "--spec-type", "ngram", "--draft-max", "6") as url:
        alone, together = answers(url, False), answers(url, True)
        text = httpx.get(url + "/metrics").text
    assert alone == plain and together == plain
    lines = dict(l.rsplit(" ", 1) for l in text.splitlines() if l.startswith("llmbook_draft_"))
    assert float(lines["llmbook_draft_drafted_total"]) >= float(lines["llmbook_draft_accepted_total"]) > 0



def test_the_server_with_a_draft_model(smollm2_path):
    "Slots sharing one draft model (a lock around its passes), each with its own draft session: the same answers."
    reqs = [dict(messages=[{"role": "user", "content": p}], max_tokens=24, temperature=0.7, seed=i) for i, p in enumerate(PROMPTS[:4])]
    def answers(url):
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
        with ThreadPoolExecutor(4) as ex:
            return list(ex.map(lambda r: client.chat.completions.create(model="x", **r).choices[0].message.content, reqs))
    with serve_process("--parallel", 2, "--n-ctx", 512, "--threads", 2) as url: plain = answers(url)
    with serve_process("--parallel", 2, "--n-ctx", 512, "--threads", 2, "-md", smollm2_path, "--draft-max", "3") as url:
        drafted = answers(url)
        text = httpx.get(url + "/metrics").text
    assert drafted == plain and "llmbook_draft_accepted_total" in text
