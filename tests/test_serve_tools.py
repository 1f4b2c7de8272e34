"""Issue 27 on the real `llmbook serve` (a subprocess, the key from LLMBOOK_API_KEY, one slot and no queue): tool calls
(required, named, streamed, auto), embeddings against the library, the API key, /metrics, the 503 before a stream's
first byte, and every refusal naming its problem while the server keeps serving."""
import base64, json, os, re, subprocess, time
import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="the server tests need the dev extras (openai, httpx, fastapi, uvicorn)")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")
from conftest import serve_process
import llmbook as lb
from llmbook.serve import embed
from llmbook.toolcalls import ToolPlan, parse_tool_calls, tool_grammar, tool_format, answer_schema

KEY, N_CTX = "env-key-27", 512
AUTH = {"Authorization": f"Bearer {KEY}"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather now in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}}, "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]



@pytest.fixture(scope="module")
def server():
    with serve_process("--parallel", 1, "--queue", 0, "--n-ctx", N_CTX, "--threads", 2, env={"LLMBOOK_API_KEY": KEY}) as url: yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model():
    return lb.load(n_ctx=N_CTX)


def post(server, path, body, headers=AUTH):
    return httpx.post(server + path, json=body, headers=headers, timeout=120)


def metrics(server) -> dict:
    "The metrics page as {sample name with labels: value}."
    r = httpx.get(server + "/metrics", headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for line in r.text.splitlines():
        if line.startswith("#"):
            assert re.fullmatch(r"# (HELP llmbook_\w+ .+|TYPE llmbook_\w+ (counter|gauge|histogram))", line), line
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def test_the_key(server):
    r = httpx.get(server + "/v1/models")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key" and "no API key" in r.json()["error"]["message"]
    r = httpx.get(server + "/v1/models", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and "not this server's" in r.json()["error"]["message"] and KEY not in r.text
    assert post(server, "/v1/embeddings", {"input": "x"}, headers={}).status_code == 401
    assert httpx.get(server + "/metrics").status_code == 401
    assert httpx.get(server + "/health").status_code == 200                    # open: for load balancers
    assert httpx.get(server + "/v1/models", headers=AUTH).status_code == 200
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server + "/v1", api_key="wrong", max_retries=0).models.list()


def test_required_and_named_calls(client):
    r = client.chat.completions.create(model="x", messages=ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=40)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None and len(c.message.tool_calls) == 1
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    assert set(json.loads(call.function.arguments)) == {"city"}
    r = client.chat.completions.create(model="x", messages=ASK, tools=[WEATHER, TIME], temperature=0, max_tokens=40,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}})
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "get_time" and json.loads(call.function.arguments)["zone"] in ("UTC", "CET", "PST")


def test_streamed_call_is_the_same_call(client):
    kw = dict(model="x", messages=ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=40)
    whole = client.chat.completions.create(**kw).choices[0].message.tool_calls[0]
    calls, finish, n_chunks = {}, None, 0
    for chunk in client.chat.completions.create(stream=True, **kw):
        n_chunks += 1
        for d in chunk.choices[0].delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            c["id"] = d.id or c["id"]
            c["name"] += (d.function.name or "") if d.function else ""
            c["arguments"] += (d.function.arguments or "") if d.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and list(calls) == [0] and n_chunks > 3
    assert calls[0]["name"] == whole.function.name and calls[0]["arguments"] == whole.function.arguments and calls[0]["id"]


def test_auto_answers_text_or_a_valid_call(client):
    r = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Say hello to Anna."}], tools=[WEATHER],
                                       temperature=0, max_tokens=40)
    m = r.choices[0].message
    if r.choices[0].finish_reason == "tool_calls": assert json.loads(m.tool_calls[0].function.arguments)["city"]
    else: assert m.content and not m.content.lstrip().startswith('{"response"') and not m.tool_calls


def test_embeddings_are_the_library_s(server, client, model):
    texts = ["The cat sat on the mat.", "A kitten was sitting on the rug."]
    r = client.embeddings.create(model="x", input=texts)                      # (the client asks for base64)
    got = np.array([d.embedding for d in r.data])
    assert np.allclose(got, embed(model, texts), atol=1e-6) and r.usage.prompt_tokens == sum(
        len(model.tokenizer.encode(t, add_special=True)) for t in texts)
    ids = model.tokenizer.encode(texts[0], add_special=True)
    for body in ({"input": ids}, {"input": [ids]}, {"input": texts[0], "encoding_format": "float"}):
        d = post(server, "/v1/embeddings", body).json()["data"]
        assert len(d) == 1 and np.allclose(d[0]["embedding"], got[0], atol=1e-6)
    d = post(server, "/v1/embeddings", {"input": texts[0], "encoding_format": "base64"}).json()["data"][0]["embedding"]
    assert np.allclose(np.frombuffer(base64.b64decode(d), "<f4"), got[0], atol=1e-6)


def test_metrics_count_what_happened(server, client):
    before = metrics(server)
    r = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Name a colour."}], temperature=0, max_tokens=5)
    after = metrics(server)
    key = 'llmbook_requests_total{path="/v1/chat/completions",status="200"}'
    assert after[key] == before.get(key, 0) + 1
    assert after["llmbook_completion_tokens_total"] - before["llmbook_completion_tokens_total"] == r.usage.completion_tokens
    assert after["llmbook_prompt_tokens_total"] - before["llmbook_prompt_tokens_total"] == r.usage.prompt_tokens
    assert after["llmbook_time_to_first_token_seconds_count"] == before["llmbook_time_to_first_token_seconds_count"] + 1
    assert after['llmbook_time_to_first_token_seconds_bucket{le="+Inf"}'] == after["llmbook_time_to_first_token_seconds_count"]
    assert after["llmbook_slots_total"] == 1 and after["llmbook_slots_busy"] == 0 and after["llmbook_requests_waiting"] == 0


def test_a_stream_without_a_slot_gets_503_before_any_byte(server):
    hold = {"prompt": "1, 2, 3, 4,", "max_tokens": 400, "temperature": 0, "stream": True, "ignore_eos": None}
    hold.pop("ignore_eos")
    with httpx.Client(timeout=60, headers=AUTH) as hc:
        r = hc.send(hc.build_request("POST", server + "/v1/completions", json=hold), stream=True)
        lines = r.iter_lines(); next(lines)                                      # the one slot is taken
        for path, body in (("/v1/completions", {**hold, "max_tokens": 2}),
                           ("/v1/chat/completions", {"messages": ASK, "stream": True, "max_tokens": 2})):
            busy = hc.post(server + path, json=body)
            assert busy.status_code == 503 and busy.headers["content-type"] == "application/json", busy.text
            assert busy.json()["error"]["code"] == "server_busy"
        r.close()
    t0 = time.time()
    while httpx.get(server + "/health").json()["slots_idle"] != 1:
        assert time.time() - t0 < 10; time.sleep(0.05)


BAD = [  # (path, body, param, words)
    ("/v1/chat/completions", {"messages": ASK, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "tensor"}}}]},
     "tools.0.function.parameters", "cannot be enforced"),
    ("/v1/chat/completions", {"messages": ASK, "tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools.0.function.name", "letters"),
    ("/v1/chat/completions", {"messages": ASK, "tools": [WEATHER, WEATHER]}, "tools.1.function.name", "two tools"),
    ("/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
     "tool_choice", "not among the tools"),
    ("/v1/chat/completions", {"messages": ASK, "tool_choice": "required"}, "tool_choice", "needs tools"),
    ("/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice", "must be"),
    ("/v1/chat/completions", {"messages": ASK + [{"role": "tool", "tool_call_id": "call_x", "content": "18 C"}]},
     "messages.1.tool_call_id", "no assistant message"),
    ("/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "grammar": "root ::= \"x\""}, "grammar", "not both"),
    ("/v1/embeddings", {"input": []}, "input", "must not be empty"),
    ("/v1/embeddings", {"input": ["fine", ""]}, "input.1", "empty"),
    ("/v1/embeddings", {"input": ["fine", "word " * 600]}, "input.1", "more than the 512"),
    ("/v1/embeddings", {"input": ["x"] * 300}, "input", "at most 256"),
    ("/v1/embeddings", {"input": [1, 2, 10 ** 7]}, "input", "not in the vocabulary"),
    ("/v1/embeddings", {"input": "x", "dimensions": 7}, "dimensions", "576 dimensions"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, "encoding_format", "float"),
    ("/v1/embeddings", {"input": "x", "inputs": "x"}, "inputs", "unknown field"),
]

@pytest.mark.parametrize("path,body,param,words", BAD, ids=[f"{b[0].split('/')[-1]}-{b[2]}-{i}" for i, b in enumerate(BAD)])
def test_refusals_name_the_problem(server, path, body, param, words):
    r = post(server, path, body)
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == param and words in err["message"], err


def test_still_serving(client):
    r = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=3, temperature=0)
    assert r.choices[0].message.content is not None
    assert client.embeddings.create(model="x", input="still here").data[0].embedding


def test_forms_and_parsers():
    "The three forms' recognition and grammars, without a server (templates as llama.cpp tells them apart)."
    from conftest import load_fixture
    templates = load_fixture("chat_templates.json")["templates"]
    forms = {name: tool_format(t["template"]) for name, t in templates.items()}
    assert forms["qwen2.5"] == forms["qwen3"] == "hermes" and forms["llama3.1"] == "llama3" and forms["chatml-smollm2"] == "generic"
    tools = [{"name": "get_weather", "description": None, "parameters": WEATHER["function"]["parameters"]}]
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    hermes = ToolPlan("hermes", tools, "required", parallel=True)
    assert parse_tool_calls(f"Checking.\n<tool_call>\n{call}\n</tool_call>\n<tool_call>\n{call}\n</tool_call>", hermes) == \
           ("Checking.", [("get_weather", '{"city": "Oslo"}')] * 2)
    assert parse_tool_calls("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", hermes)[1] == []
    g = tool_grammar(hermes)
    assert g.accepts_text(f"<tool_call>\n{call}\n</tool_call>") and not g.accepts_text(call)
    llama = ToolPlan("llama3", tools, "required")
    assert parse_tool_calls('{"name": "get_weather", "parameters": {"city": "Rome"}}', llama) == (None, [("get_weather", '{"city": "Rome"}')])
    assert tool_grammar(llama).accepts_text('{"name": "get_weather", "parameters": {"city": "Rome"}}')
    assert tool_grammar(ToolPlan("hermes", tools, "auto")) is None            # auto: recognised after the fact
    par = ToolPlan("generic", tools, "required", parallel=True)
    two = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_weather", "arguments": {"city": "Rome"}}]}'
    assert parse_tool_calls(two, par) == (None, [("get_weather", '{"city": "Oslo"}'), ("get_weather", '{"city": "Rome"}')])
    assert tool_grammar(par).accepts_text(two) and not tool_grammar(par).accepts_text('{"tool_calls": []}')
    assert parse_tool_calls('{"response": {"a": 1}}', ToolPlan("generic", tools, "auto")) == ('{"a": 1}', [])
    assert parse_tool_calls('{"tool_call": {"name": "get_weather", "arguments": {"city": "X"}}} and more', ToolPlan("generic", tools, "auto"))[1] == []
    # $refs of several tools live side by side in one schema
    ref_tool = {"name": "add", "description": None, "parameters": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
                "required": ["p"], "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}}
    plan = ToolPlan("generic", tools + [ref_tool], "required")
    assert set(answer_schema(plan)["$defs"]) == {"add--P"}
    assert tool_grammar(plan).accepts_text('{"tool_call": {"name": "add", "arguments": {"p": {"x": 3}}}}')
