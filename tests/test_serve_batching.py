"""Continuous batching (issue 27): one forward pass per step over every slot's tokens, and one answer per request.

The engine's `forward_batch` (chapter 15) against each part run alone, the batcher of chapter 27 in-process (sessions
generating at once against each alone), and the real server: concurrent requests with different prompt lengths,
seeds, temperatures, grammars and stop strings against each sent alone. Every comparison is exact."""
import threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pytest

import llmbook as lb
from llmbook.generate import Session
from llmbook.scheduler import Cancelled, SlotPool
from conftest import check_decode_step, run_alone, serve_process


def check_forward_batch(model, rng):
    "Caches at different positions, prompt chunks (some with no logits asked) and single tokens, in one pass."
    n_vocab, caches = model.config.n_vocab, [model.new_cache(128) for _ in range(5)]
    for cache, n0 in zip(caches, (0, 3, 17, 40, 1)):           # some context already in each cache
        if n0: model.forward(rng.integers(0, n_vocab, n0), cache)
    parts = [(rng.integers(0, n_vocab, n), cache, n_out)
             for (n, n_out), cache in zip([(1, 1), (9, 1), (1, 1), (24, 3), (5, 0)], caches)]
    alone = run_alone(model, parts)
    together = model.engine.forward_batch(parts)
    assert [a.shape for a in together] == [(n_out, n_vocab) for _, _, n_out in parts]
    assert all(np.array_equal(a, b) for a, b in zip(alone, together))
    assert [c.pos for c in caches] == [0, 3, 17, 40, 1]           # the caller advances the caches, not the engine


@pytest.mark.parametrize("kernels", ["default", "float"])
def test_forward_batch_is_each_part_alone(real_model_path, kernels):
    model = lb.load(real_model_path, deterministic=True, kernels=None if kernels == "default" else kernels)
    check_forward_batch(model, np.random.default_rng(0))


@pytest.mark.parametrize("kernels, cache_type", [("default", "f16"), ("float", "f32"), ("default", "q8_0")])
def test_decode_step_of_several_caches_is_each_alone(real_model_path, kernels, cache_type):
    "Depths in one segment, on a segment's edge, over several, past Gemma 3's window (its rings): each cache's logits."
    model = lb.load(real_model_path, n_ctx=2048, deterministic=True, cache_type=cache_type,
                    kernels=None if kernels == "default" else kernels)
    check_decode_step(model, (0, 5, 191, 192, 450, 1100), np.random.default_rng(1))


@pytest.fixture(scope="module")
def model():
    return lb.load(n_ctx=512, deterministic=True)


# different prompt lengths (one longer than the batch: chunked), temperatures, seeds, lengths, a stop string
JOBS = [("Name a fruit.", dict(max_tokens=12, temperature=0.0)),
        ("Write a long and detailed story about a dragon who lived in the mountains above a small village, and "
         "about the people of the village, the baker, the smith and the children who were afraid of him.",
         dict(max_tokens=20, temperature=0.7, seed=11, top_k=0, top_p=1.0, min_p=0.0)),
        ("Count from 1 to 20: 1, 2, 3,", dict(max_tokens=40, temperature=0.0, stop=["9"])),
        ("Tell me about tea.", dict(max_tokens=24, temperature=1.3, seed=3, repeat_penalty=1.1))]


def generate(session, prompt, kw):
    c = session.generate(session.model.chat_prompt([{"role": "user", "content": prompt}]), logprobs=2, **kw)
    return c.tokens, c.logprobs, str(c), c.stop_reason


def test_batched_sessions_give_each_answer_alone(model):
    pool = SlotPool(model, n_slots=4, n_ctx=512, n_batch=16)
    alone = [generate(Session(model, 512), p, kw) for p, kw in JOBS]
    def in_slot(i):
        s = pool.slots[i].session
        try: return generate(s, *JOBS[i])
        finally: pool.batcher.leave(s.cache)
    with ThreadPoolExecutor(4) as ex: together = list(ex.map(in_slot, range(4)))
    assert together == alone and len({a[2] for a in alone}) == 4
    steps = list(pool.batcher.steps)
    assert max(len(s) for s in steps) >= 2                      # slots shared passes
    assert max(sum(n for _, n in s) for s in steps) <= 16       # never more than n_batch tokens in a pass
    long = pool.slots[1].session.cache
    assert sum(1 for s in steps for c, n in s if c is long and n > 1) >= 2    # the long prompt ran in chunks
    assert pool.batcher.n_rows > pool.batcher.n_passes


def test_a_cancelled_prompt_stops_between_chunks(model):
    pool = SlotPool(model, n_slots=1, n_ctx=512, n_batch=8)
    shared, cache = pool.slots[0].session.model, pool.slots[0].session.cache
    cancel = threading.Event(); cancel.set()
    pool.batcher.local.cancel = cancel
    with pytest.raises(Cancelled): shared.forward(list(range(100, 160)), cache, n_out=1)
    assert cache.pos < 60
    pool.batcher.local.cancel = None                            # and the batcher still serves
    cache.rewind(0)
    assert np.array_equal(shared.forward([1, 2, 3], cache, n_out=1), model.forward([1, 2, 3], model.new_cache(8), n_out=1))


def test_refusals_stay_in_the_caller_s_thread(model):
    pool = SlotPool(model, n_slots=1, n_ctx=16, n_batch=8)
    shared, cache = pool.slots[0].session.model, pool.slots[0].session.cache
    with pytest.raises(Exception, match="16|room|context"): shared.forward(list(range(20)), cache)   # checked before the batcher
    with pytest.raises(ValueError, match="out of range"): shared.forward([10 ** 9], cache)
    assert shared.forward([5, 6], cache, n_out=2).shape == (2, model.config.n_vocab)


# --- the real server
openai = pytest.importorskip("openai", reason="the server tests need the dev extras (openai, httpx, fastapi, uvicorn)")
httpx = pytest.importorskip("httpx")


def test_server_batches_and_each_answer_is_its_own():
    with serve_process("--parallel", 4, "--batch-size", 16, "--n-ctx", 512, "--threads", 2) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        reqs = [dict(messages=[{"role": "user", "content": p}], logprobs=True, top_logprobs=2,
                     extra_body={"cache_prompt": False, **{k: v for k, v in kw.items() if k in ("top_k", "min_p", "repeat_penalty")}},
                     **{k: v for k, v in kw.items() if k not in ("top_k", "min_p", "repeat_penalty")})
                for p, kw in JOBS]
        reqs.append(dict(messages=[{"role": "user", "content": "Name a colour, as JSON."}], max_tokens=24, temperature=0.9,
                         seed=8, response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
                         extra_body={"cache_prompt": False}))
        def ask(r):
            out = client.chat.completions.create(model="x", **r).choices[0]
            lps = [(t.token, t.logprob) for t in out.logprobs.content] if out.logprobs else None
            return out.message.content, out.finish_reason, lps
        def ask_streamed(r):
            s = client.chat.completions.create(model="x", stream=True, **r)
            return "".join(c.choices[0].delta.content or "" for c in s if c.choices)
        alone = [ask(r) for r in reqs]
        alone_streamed = [ask_streamed(r) for r in reqs]
        before = metrics(url)
        with ThreadPoolExecutor(10) as ex:
            together = ex.map(ask, reqs)
            together_streamed = ex.map(ask_streamed, reqs)
            together, together_streamed = list(together), list(together_streamed)
        after = metrics(url)
        assert together == alone and together_streamed == alone_streamed == [a[0] for a in alone]
        assert alone[2][1] == "stop" and "8" in alone[2][0] and "9" not in alone[2][0]   # the stop string ended it
        assert after["llmbook_batch_tokens_total"] - before["llmbook_batch_tokens_total"] > \
               after["llmbook_forward_passes_total"] - before["llmbook_forward_passes_total"] > 0   # passes held several rows


def metrics(url) -> dict:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in httpx.get(url + "/metrics").text.splitlines()
            if line and not line.startswith("#")}


def test_no_thread_is_left_when_a_server_stops(model):
    "The batcher's thread starts with the first request and ends with the server (the app's lifespan stops it)."
    from llmbook.serve import make_app, BackgroundServer, free_port
    batchers = lambda: [t for t in threading.enumerate() if t.name == "llmbook-batcher" and t.is_alive()]
    before = len(batchers())
    app = make_app(model, n_slots=2, n_ctx=64)
    assert len(batchers()) == before                       # an app that has served nothing runs no thread
    with BackgroundServer(app, port=free_port()) as server:
        r = httpx.post(server.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 4}, timeout=120)
        assert r.status_code == 200, r.text
        assert len(batchers()) == before + 1
    assert len(batchers()) == before and not app.state.pool.batcher.thread.is_alive()
