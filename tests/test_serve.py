"""`llmbook serve` (issue 16) as a client sees it: the real server in a subprocess on a free localhost port, driven
with the official `openai` client (and httpx for malformed bodies, disconnects and the queue)."""
import json, os, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import pytest

openai = pytest.importorskip("openai", reason="the server tests need the dev extras (openai, httpx, fastapi, uvicorn)")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from conftest import llmbook, serve_process
import llmbook as lb

N_CTX, PARALLEL, QUEUE = 512, 2, 2



@pytest.fixture(scope="module")
def server():
    with serve_process("--parallel", PARALLEL, "--n-ctx", N_CTX, "--queue", QUEUE, "--threads", 2) as url: yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model():
    return lb.load(n_ctx=N_CTX)


def chat(client, content, **kw):
    return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": content}],
                                          **{"max_tokens": 16, "temperature": 0, **kw})


def wait_idle(url, timeout=10.0) -> float:
    "Seconds until every slot is idle and nobody waits (fails after `timeout`)."
    t0 = time.time()
    while time.time() - t0 < timeout:
        h = httpx.get(url + "/health").json()
        if h["slots_processing"] == 0 and h["requests_waiting"] == 0: return time.time() - t0
        time.sleep(0.05)
    pytest.fail(f"slots still busy after {timeout} s: {h}")


def test_health_and_models(server, client):
    h = httpx.get(server + "/health").json()
    assert h["status"] == "ok" and h["slots_idle"] == PARALLEL
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "SmolLM2-135M-Instruct.Q4_1" and models[0].model_extra["meta"]["n_ctx_slot"] == N_CTX


def test_chat_greedy_matches_the_library(client, model):
    r = chat(client, "What is the capital of France?", max_tokens=20)
    want = model.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=20)
    assert r.choices[0].message.content == str(want) and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == {"length": "length", "eos": "stop"}[want.stop_reason]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    n_prompt = len(model.chat_prompt([{"role": "user", "content": "What is the capital of France?"}]))
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (n_prompt, len(want.tokens))
    assert r.usage.total_tokens == n_prompt + len(want.tokens)


def test_chat_stream_is_the_same_text_with_usage(client):
    whole = chat(client, "Write a haiku about tea.", max_tokens=30)
    chunks = list(chat(client, "Write a haiku about tea.", max_tokens=30, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 5      # pieces, as they were made


def test_sse_wire_format_ends_with_done(server):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0, "stream": True}
    with httpx.stream("POST", server + "/v1/chat/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    json.loads(events[0][6:])


def test_completion_with_stop_and_usage(client, model):
    prompt = "The three primary colours are"
    r = client.completions.create(model="x", prompt=prompt, max_tokens=30, temperature=0, stop=["."])
    want = model.generate(prompt, max_tokens=30, stop=["."])
    assert r.choices[0].text == str(want) and "." not in r.choices[0].text and r.object == "text_completion"
    assert r.choices[0].finish_reason == "stop" == {"stop": "stop"}[want.stop_reason]
    assert r.usage.prompt_tokens == len(model.tokenizer.encode(prompt, add_special=True, parse_special=True))
    assert r.usage.completion_tokens == len(want.tokens)
    # token ids as the prompt, streamed, cut by the length limit
    ids = model.tokenizer.encode(prompt, add_special=True)
    chunks = list(client.completions.create(model="x", prompt=ids, max_tokens=5, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == str(model.generate(ids, max_tokens=5))
    assert chunks[-1].choices[0].finish_reason == "length"


def test_chat_prefix_is_reused(client):
    messages = [{"role": "user", "content": "Hello! Who are you?"}]
    r1 = client.chat.completions.create(model="x", messages=messages, max_tokens=12, temperature=0)
    messages += [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "Tell me more."}]
    r2 = client.chat.completions.create(model="x", messages=messages, max_tokens=12, temperature=0)
    cached, t = r2.usage.prompt_tokens_details.cached_tokens, r2.model_extra["timings"]
    assert cached >= r1.usage.prompt_tokens and t["prompt_n"] == r2.usage.prompt_tokens - cached < 30


def test_four_clients_at_once_get_their_own_greedy_answers(server, client, model):
    # One answer (chapter 16): a request's tokens and logprobs do not depend on what else the server runs, nor on a
    # cached prefix another request left in its slot: compared exactly, with prefix reuse on (the default).
    questions = ["Name a fruit.", "Name a city.", "Name an animal.", "Name a river."]
    def ask(q):
        r = chat(client, q, logprobs=True, top_logprobs=2)
        return r.choices[0].message.content, [(t.token, t.logprob, [(x.token, x.logprob) for x in t.top_logprobs])
                                               for t in r.choices[0].logprobs.content]
    want = [str(model.chat([{"role": "user", "content": q}], max_tokens=16)) for q in questions]
    alone = [ask(q) for q in questions]
    with ThreadPoolExecutor(4) as ex: together = list(ex.map(ask, questions))
    again = [ask(q) for q in questions]                 # now with prefixes cached in the slots
    assert together == alone == again and [a for a, _ in alone] == want and len(set(want)) > 1
    wait_idle(server)


def test_seeded_sampling_is_the_same_alone_and_together(server, client):
    "A seeded draw at temperature 1 is a function of the request alone: the same text with four requests in flight."
    prompts = [("Tell me a word.", 1), ("Tell me a colour.", 2), ("Tell me a number.", 3), ("Tell me a name.", 4)]
    ask = lambda p: chat(client, p[0], max_tokens=12, temperature=1.0, seed=p[1]).choices[0].message.content
    alone = [ask(p) for p in prompts]
    with ThreadPoolExecutor(4) as ex: together = list(ex.map(ask, prompts))
    assert together == alone
    wait_idle(server)


def test_langchain_batch_equals_sequential(server):
    "LangChain's ChatOpenAI.batch (concurrent requests) against the same prompts invoked one after another."
    lc = pytest.importorskip("langchain_openai", reason="the LangChain check needs langchain-openai (dev extras)")
    llm = lc.ChatOpenAI(base_url=server + "/v1", api_key="none", model="smollm2", temperature=0, max_tokens=16,
                        max_retries=0, timeout=120)
    prompts = ["Name a planet.", "Name a tree.", "Name a metal."]
    sequential = [llm.invoke(p).content for p in prompts]
    batched = [r.content for r in llm.batch(prompts, config={"max_concurrency": 3})]
    assert batched == sequential and all(sequential)
    wait_idle(server)


def test_a_disconnect_frees_the_slot(server):
    body = {"messages": [{"role": "user", "content": "Tell me a very long story."}], "max_tokens": 400,
            "temperature": 0, "stream": True}
    with httpx.stream("POST", server + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert httpx.get(server + "/health").json()["slots_processing"] == 1
    # the client hung up after a few tokens: the generation stops within a token, long before 400 tokens
    assert wait_idle(server, timeout=5) < 5 and any(g.startswith("data: ") for g in got)
    # not streaming: the client gives up (times out) and the server notices
    body.update(stream=False)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server + "/v1/chat/completions", json=body, timeout=1.0)
    wait_idle(server, timeout=5)


def test_a_full_queue_is_refused_with_503(server):
    # a counting prompt runs to the token limit (no end-of-text): every slot stays busy while the streams are open
    body = lambda n: {"prompt": f"{n}, {n + 1}, {n + 2}, {n + 3},", "max_tokens": 300, "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as hc:
        held = []
        for i in range(PARALLEL):
            r = hc.send(hc.build_request("POST", server + "/v1/completions", json=body(i)), stream=True)
            lines = r.iter_lines()                     # (kept: dropping the iterator would close the stream)
            next(lines); held.append((r, lines))
        waiters = []                                   # QUEUE more wait for a slot
        def wait_for_slot(i):
            try: httpx.post(server + "/v1/completions", json={**body(i), "stream": False, "max_tokens": 2}, timeout=60)
            except httpx.HTTPError: pass
        for i in range(QUEUE):
            t = threading.Thread(target=wait_for_slot, args=(10 + i,)); t.start(); waiters.append(t)
        t0 = time.time()
        while httpx.get(server + "/health").json()["requests_waiting"] < QUEUE:
            assert time.time() - t0 < 10; time.sleep(0.05)
        r = httpx.post(server + "/v1/completions", json=body(99), timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "server_busy" and "busy" in r.json()["error"]["message"]
        for r, _ in held: r.close()
        for t in waiters: t.join(timeout=60)
    wait_idle(server)


BAD = [  # (body, status, param, words in the message)
    ({"messages": [{"role": "user", "content": "Hi"}], "temprature": 0}, 400, "temprature", "unknown field"),
    ({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": "16"}, 400, "max_tokens", "integer"),
    ({"messages": [{"role": "user", "content": 3}]}, 400, "messages.0.content", "string"),
    ({"messages": [{"role": "wizard", "content": "Hi"}]}, 400, "messages.0.role", "'user'"),
    ({"model": "x"}, 400, "messages", "required"),
    ({"messages": [{"role": "user", "content": "Hi"}], "temperature": 7}, 400, "temperature", "between 0 and 2"),
    ({"messages": [{"role": "user", "content": "Hi"}], "n": 3}, 400, "n", "n must be 1"),
    ({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}, 400, "max_tokens", "at least 1"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function"}]}, 400, "tools.0.function", "required"),
    ({"messages": [{"role": "user", "content": "Hi"}], "logit_bias": {"cat": 1}}, 400, "logit_bias", "token ids"),
    ({"messages": [{"role": "user", "content": "word " * 600}]}, 400, "messages", "512"),
    ({"messages": [{"role": "user", "content": "Hi"}], "top_logprobs": 2}, 400, "top_logprobs", "logprobs"),
    ({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "yaml"}}, 400, "response_format.type", "json_schema"),
]

@pytest.mark.parametrize("body,status,param,words", BAD, ids=[b[2] for b in BAD])
def test_bad_chat_requests_are_refused_by_name(server, body, status, param, words):
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=30)
    err = r.json()["error"]
    assert r.status_code == status and err["param"] == param and words in err["message"], err
    assert err["type"] == "invalid_request_error"


def test_too_long_prompt_says_context_length_exceeded(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="x", prompt="word " * 600, max_tokens=4)
    assert e.value.body["code"] == "context_length_exceeded" and "512" in e.value.body["message"]


def test_malformed_bodies(server):
    for raw, words in ((b'{"messages": [', "not valid JSON"), (b"[1, 2]", "JSON object"), (b"\xff\xfe", "not valid JSON"),
                       (b"", "not valid JSON")):
        r = httpx.post(server + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
    r = httpx.post(server + "/v1/completions", json={"prompt": [[1, 2], [3]]})
    assert r.status_code == 400 and "one prompt" in r.json()["error"]["message"]
    r = httpx.post(server + "/v1/completions", json={"prompt": [10**9]})
    assert r.status_code == 400 and "vocabulary" in r.json()["error"]["message"]
    r = httpx.post(server + "/v1/completions", content=b"x" * (9 << 20))
    assert r.status_code == 413
    r = httpx.get(server + "/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(server + "/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()


def test_tokenize_detokenize(server, model):
    r = httpx.post(server + "/tokenize", json={"content": "Hello world"}).json()
    assert r["tokens"] == model.tokenizer.encode("Hello world")
    r2 = httpx.post(server + "/tokenize", json={"content": "Hello world", "with_pieces": True}).json()
    assert [t["piece"] for t in r2["tokens"]] == ["Hello", " world"]
    assert httpx.post(server + "/detokenize", json={"tokens": r["tokens"]}).json() == {"content": "Hello world"}
    bad = httpx.post(server + "/detokenize", json={"tokens": [-1]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"


def test_logprobs(client, model):
    r = chat(client, "Name a colour.", max_tokens=8, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert 0 < len(content) <= r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        assert t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5   # greedy
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token
    if r.choices[0].finish_reason == "length":
        assert "".join(t.token for t in content) == r.choices[0].message.content
    c = client.completions.create(model="x", prompt="The sky is", max_tokens=5, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5 and all(len(d) <= 2 for d in lp.top_logprobs)
    assert "".join(lp.tokens) == c.choices[0].text


def test_penalties_bias_and_seed_are_honoured(client, model):
    base = chat(client, "List some animals.", max_tokens=24)
    pen = chat(client, "List some animals.", max_tokens=24, frequency_penalty=1.5, presence_penalty=1.0)
    assert pen.choices[0].message.content != base.choices[0].message.content
    first = model.tokenizer.encode(base.choices[0].message.content)[0]
    banned = chat(client, "List some animals.", max_tokens=4, logit_bias={str(first): -100})
    assert not banned.choices[0].message.content.startswith(model.tokenizer.decode([first]))
    a, b, c = (chat(client, "Tell me a word.", max_tokens=12, temperature=1.0, seed=s).choices[0].message.content
               for s in (42, 42, 7))
    assert a == b != c


def test_json_schema_response_validates(client):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                                              "pets": {"type": "array", "items": {"type": "string", "maxLength": 20},
                                                       "maxItems": 3}},
              "required": ["name", "age", "pets"], "additionalProperties": False}
    r = chat(client, "Invent a person with a name, an age and pets.", max_tokens=200,
             response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}})
    assert r.choices[0].finish_reason == "stop"
    obj = json.loads(r.choices[0].message.content)
    assert set(obj) == {"name", "age", "pets"} and isinstance(obj["name"], str) and isinstance(obj["age"], int)
    assert isinstance(obj["pets"], list) and all(isinstance(p, str) for p in obj["pets"])
    r = chat(client, "Give me a JSON object with a cat's name and colour.", max_tokens=120,
             response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    broken = {"type": "object", "properties": {"name": {"type": "nonsense"}}}      # a schema no grammar can come from
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "Hi", max_tokens=8, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": broken}})
    assert "nonsense" in str(e.value) or "schema" in str(e.value)


def test_still_serving_after_everything(server, client):
    wait_idle(server)
    assert chat(client, "Say hi.", max_tokens=4).choices[0].message.content
    assert httpx.get(server + "/health").json()["slots_idle"] == PARALLEL


def test_serve_help_and_import_without_the_extra():
    r = llmbook("serve", "--help")
    assert r.returncode == 0 and all(o in r.stdout for o in ("--port", "--parallel", "--n-ctx", "--host", "--queue",
                                                              "--api-key", "LLMBOOK_API_KEY", "--pooling"))
    code = ("import sys; sys.modules['fastapi'] = sys.modules['uvicorn'] = None\n"
            "import llmbook; from llmbook.cli import main\n"
            "assert llmbook.make_app\n"
            "sys.exit(main(['serve', '--port', '1']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "pip install 'llmbook[serve]'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-c", "import sys, llmbook; print(sorted(m for m in ('fastapi', 'uvicorn', 'pydantic', "
                        "'starlette') if m in sys.modules))"], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr



def test_a_stream_collected_after_its_server_stopped_says_nothing():
    """A streamed answer's generator can be collected (from a cycle) after its server's event loop closed; its slot is
    then not handed back, quietly: no 'Event loop is closed' into stderr (seen on chapter 27's page)."""
    import asyncio, gc, weakref
    from llmbook.serve import _call_on_loop as call_on_loop
    ran, raised = [], []
    loop = asyncio.new_event_loop()
    call_on_loop(loop, lambda: ran.append("open"))
    loop.run_until_complete(asyncio.sleep(0))                      # an open loop runs it
    loop.close()
    class Events: pass
    events = Events(); events.cycle = events
    weakref.finalize(events, call_on_loop, loop, lambda: ran.append("closed"))
    old_hook, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        del events; gc.collect()
    finally: sys.unraisablehook = old_hook
    assert ran == ["open"] and not raised, (ran, [f"{u.exc_type.__name__}: {u.exc_value}" for u in raised])
