"""Tool calls in harmony's form (gpt-oss), as llama.cpp's gpt-oss chat format does them (common/chat.cpp).

fixtures/gpt-oss.jinja is OpenAI's gpt-oss chat template as llama.cpp ships it (models/templates/openai-gpt-oss-120b.jinja),
taken from a llama.cpp fork's copy whose generation prompt had been changed to force `<|channel|>final`: that change is
undone here (the prompt ends with `<|start|>assistant`, as upstream's).
The gpt-oss test files have random weights and cannot write harmony's markers, so the server runs SmolLM2 with this
template (its markers are plain text to SmolLM2's vocabulary): the grammar of `required` holds the reply to harmony's
layout, and the parser, the stream and the openai SDK's loop run on what it wrote. The parser's cases are llama.cpp's
own (tests/test-chat.cpp, the gpt-oss block): the same replies give the same content, reasoning and calls."""
import json
from pathlib import Path
import pytest
import llmbook
from llmbook.moe import _HarmonyReader, harmony_messages, harmony_split
from llmbook.serve import chat_message
from llmbook.toolcalls import ToolPlan, parse_tool_calls, tool_format, tool_grammar

TEMPLATE = (Path(__file__).parent / "fixtures" / "gpt-oss.jinja").read_text()
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather now in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}}, "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# SmolLM2 never saw harmony: shown a call in the system message, it writes one (without it, its preamble rambles on)
SHOW = {"role": "system", "content": "Answer with a call: <|start|>assistant<|channel|>commentary to=functions.get_weather "
                                     '<|constrain|>json<|message|>{"city": "London"}<|call|>'}
CALL_ASK = [SHOW] + ASK
N_CTX = 768


def plan_of(*tools, choice="auto"):
    return ToolPlan("harmony", [{"name": t["function"]["name"], "description": t["function"]["description"],
                                 "parameters": t["function"]["parameters"]} for t in tools], choice)


# ---------------------------------------------------------------- the parser, on llama.cpp's cases
SPECIAL = {"type": "function", "function": {"name": "special_function", "description": "I'm special",
           "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}}
THINK = "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
HELLO = "Hello, world!\nWhat's up?"
CALL = ("special_function", '{"arg1": 1}')
LLAMA_CPP_CASES = [   # reply -> (content, reasoning_content, calls), as llama.cpp's test-chat.cpp expects them
    ("<|channel|>analysis<|message|>I'm\nthink", ("", "I'm\nthink", [])),
    (THINK + "<|start|>assistant<|channel|>final<|message|>" + HELLO, (HELLO, "I'm\nthinking", [])),
    (THINK + "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
     (None, "I'm\nthinking", [CALL])),
    (THINK + "<|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}",
     (None, "I'm\nthinking", [CALL])),
    (THINK + "<|start|>assistant<|channel|>analysis to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
     (None, "I'm\nthinking", [CALL])),
    (THINK + "<|start|>assistant<|channel|>commentary<|message|>" + HELLO, (HELLO, "I'm\nthinking", [])),
    (THINK + "<|start|>assistant<|channel|>commentary<|message|>" + HELLO + "<|end|>"
     "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
     (HELLO, "I'm\nthinking", [CALL])),
    (" to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}", (None, "", [CALL])),
    (" to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}", (None, "", [CALL])),
    (THINK + "<|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
     (None, "I'm\nthinking", [CALL])),
]


@pytest.mark.parametrize("reply,want", LLAMA_CPP_CASES)
def test_parser_agrees_with_llama_cpp(reply, want):
    content, reasoning, calls = want
    assert parse_tool_calls(reply, plan_of(SPECIAL)) == (content, calls)
    assert harmony_split(reply)["reasoning_content"] == reasoning
    if calls:          # without tools (llama.cpp's parse_tool_calls = false) the call is neither content nor reasoning
        assert harmony_split(reply) == {"reasoning_content": reasoning, "content": content or ""}


def test_calls_that_are_not_ours_are_passed_on_as_text():
    "An unknown tool, arguments that are not a JSON object, or another recipient: no call, the message kept as written."
    plan = plan_of(WEATHER)
    head = THINK + "<|start|>assistant<|channel|>commentary to=functions."
    for bad in [head + 'get_time <|constrain|>json<|message|>{"zone": "UTC"}',      # not one of the tools
                head + 'get_weather <|constrain|>json<|message|>{"city": ',          # cut JSON
                head + 'get_weather <|constrain|>json<|message|>"Paris"',            # not an object
                head + 'get_weather <|constrain|>json<|message|>{"city": "Paris"} and more',
                THINK + '<|start|>assistant<|channel|>commentary to=browser.search<|message|>{"query": "Paris"}']:
        content, calls = parse_tool_calls(bad, plan)
        assert calls == [] and content == bad[len(THINK):], (bad, content)
        msg, finish = chat_message(bad, plan, "stop")
        assert finish == "stop" and "tool_calls" not in msg and msg["content"] == content
    good = head + 'get_weather <|constrain|>json<|message|>{"city": "Paris"}'
    assert chat_message(good, plan, "stop")[1] == "tool_calls"
    assert parse_tool_calls(good + "<|start|>assistant<|channel|>commentary to=functions.get_time<|message|>{}", plan)[1] == []
    m = harmony_messages(good)
    assert [(x["channel"], x["to"]) for x in m] == [("analysis", None), ("commentary", "functions.get_weather")]


def test_grammar_of_required_and_named():
    two = plan_of(WEATHER, TIME, choice="required")
    g = tool_grammar(two)
    call = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}'
    assert g.accepts_text(call) and g.accepts_text(THINK + "<|start|>assistant" + call)
    assert g.accepts_text(' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}')   # as the template writes it
    assert g.accepts_text(THINK + "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant" + call)
    assert g.accepts_text('<|channel|>analysis to=functions.get_time<|message|>{"zone": "CET"}')
    assert not g.accepts_text('<|channel|>analysis to=functions.get_time<|message|>{"zone": "EST"}')    # not in the enum
    assert not g.accepts_text(call.replace("get_weather", "get_date"))                                 # no such tool
    assert not g.accepts_text("<|channel|>final<|message|>It rains.")                                  # a call is required
    assert not g.accepts_text("<|channel|>analysis<|message|>a<|end|>b<|end|><|start|>assistant" + call)  # one <|end|> ends it
    named = tool_grammar(plan_of(WEATHER, TIME, choice="get_time"))
    assert named.accepts_text('<|channel|>commentary to=functions.get_time<|message|>{"zone": "UTC"}')
    assert not named.accepts_text(call)
    assert tool_grammar(plan_of(WEATHER)) is None                       # auto: the model chooses
    assert tool_format(TEMPLATE) == "harmony"


def test_reader_streams_no_call_as_content(tmp_path):
    "Token by token on harmony's control tokens: the reasoning streams, a call (recipient in the header or after the role) never does."
    from test_gptoss import marker_tokenizer
    tok, _ = marker_tokenizer(tmp_path)
    for reply in [THINK + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>',
                  ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>']:
        reader = _HarmonyReader(tok)
        pieces = [p for t in tok.encode(reply, add_special=False, parse_special=True) for p in reader.feed(t)] + reader.finish()
        assert [k for k, _ in pieces if k == "content"] == [], pieces
        assert "".join(t for _, t in pieces) == harmony_split(reply)["reasoning_content"]


# ---------------------------------------------------------------- the server, on SmolLM2 with gpt-oss's template
@pytest.fixture(scope="module")
def harmony_model(smollm2_path, tmp_path_factory):
    from test_gptoss import with_template
    return with_template(smollm2_path, tmp_path_factory.mktemp("harmony") / "smollm2-harmony.gguf", TEMPLATE)


@pytest.fixture(scope="module")
def app_client(harmony_model):
    pytest.importorskip("fastapi"); pytest.importorskip("httpx")
    from fastapi.testclient import TestClient
    from llmbook.serve import make_app
    m = llmbook.load(harmony_model, n_ctx=N_CTX, deterministic=True)
    return m, TestClient(make_app(m, n_slots=1, n_ctx=N_CTX))


def prompt_text(m, messages, tools=None, tool_choice=None):
    "The prompt serve builds for a chat request, decoded (SmolLM2 reads harmony's markers as text: they come back whole)."
    from llmbook.serve import chat_ids, parse_request, tool_plan
    body = {"model": "m", "messages": messages, **({"tools": tools} if tools else {}), **({"tool_choice": tool_choice} if tool_choice else {})}
    req = parse_request(json.dumps(body).encode(), "ChatRequest")
    return m.tokenizer.decode(chat_ids(m, req, tool_plan(m, req)))


def test_the_template_renders_tools_calls_and_results(app_client):
    m, _ = app_client
    text = prompt_text(m, [{"role": "system", "content": "Be brief."}] + ASK, [WEATHER, TIME])
    assert "Calls to these tools must go to the commentary channel: 'functions'.<|end|>" in text
    assert ("<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n"
            "// The weather now in a city\ntype get_weather = (_: {\ncity: string,\n}) => any;\n\n"
            '// The time now in a time zone\ntype get_time = (_: {\nzone: any,\n}) => any;\n\n} // namespace functions<|end|>') in text
    assert text.endswith("<|start|>user<|message|>What is the weather in Paris?<|end|><|start|>assistant")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    turn = ASK + [{"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "Need the weather."},
                  {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "cloudy"}'}]
    text = prompt_text(m, turn, [WEATHER])
    assert text.endswith('<|start|>user<|message|>What is the weather in Paris?<|end|>'
                         '<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>'
                         '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
                         '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"{\\"sky\\": \\"cloudy\\"}"<|end|>'
                         '<|start|>assistant'), text[-400:]
    # once a final answer follows, the call's reasoning is dropped (the template's rule for earlier turns)
    later = turn + [{"role": "assistant", "content": "Cloudy."}, {"role": "user", "content": "And in Oslo?"}]
    assert "Need the weather." not in prompt_text(m, later, [WEATHER])


def test_forced_call_parses_and_validates(app_client):
    import jsonschema
    m, client = app_client
    body = {"model": "m", "messages": CALL_ASK, "tools": [WEATHER], "tool_choice": "required", "temperature": 0, "max_tokens": 120}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    msg = choice["message"]
    assert choice["finish_reason"] == "tool_calls" and len(msg["tool_calls"]) == 1, msg
    f = msg["tool_calls"][0]["function"]
    assert f["name"] == "get_weather"
    jsonschema.validate(json.loads(f["arguments"]), WEATHER["function"]["parameters"])
    assert "<|" not in (msg["content"] or "") + msg.get("reasoning_content", "")
    # the library's own generation under the same grammar wrote that call, in harmony's layout
    from llmbook.serve import chat_ids, parse_request, tool_plan
    req = parse_request(json.dumps(body).encode(), "ChatRequest")
    plan = tool_plan(m, req)
    c = m.generate(chat_ids(m, req, plan), max_tokens=120, temperature=0, grammar=tool_grammar(plan))
    raw = str(c)
    assert tool_grammar(plan).accepts_text(raw) and raw.count("to=functions.get_weather") == 1, raw
    assert parse_tool_calls(raw, plan) == (msg["content"], [("get_weather", f["arguments"])])
    assert r.json()["usage"]["completion_tokens"] == len(c.tokens)
    # a named function among two
    r = client.post("/v1/chat/completions", json={**body, "tools": [WEATHER, TIME],
                                                  "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
    f = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls" and f["name"] == "get_time"
    assert json.loads(f["arguments"])["zone"] in ("UTC", "CET", "PST")


def sse_chunks(text):
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]


def test_streamed_call_is_the_same_answer(app_client):
    _, client = app_client
    body = {"model": "m", "messages": CALL_ASK, "tools": [WEATHER], "tool_choice": "required", "temperature": 0, "max_tokens": 120}
    whole = client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    r = client.post("/v1/chat/completions", json={**body, "stream": True})
    assert r.status_code == 200, r.text
    chunks = sse_chunks(r.text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = {}
    for d in deltas:
        for t in d.get("tool_calls") or []:
            c = calls.setdefault(t["index"], {"id": None, "name": "", "arguments": ""})
            c["id"] = t.get("id") or c["id"]
            c["name"] += t.get("function", {}).get("name") or ""
            c["arguments"] += t.get("function", {}).get("arguments") or ""
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert list(calls) == [0] and calls[0]["id"].startswith("call_")
    assert (calls[0]["name"], calls[0]["arguments"]) == (whole["tool_calls"][0]["function"]["name"], whole["tool_calls"][0]["function"]["arguments"])
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == whole.get("reasoning_content", "")
    assert "".join(d.get("content") or "" for d in deltas) == (whole["content"] or "")
    first_call = next(i for i, d in enumerate(deltas) if d.get("tool_calls"))
    assert not any(d.get("content") or d.get("reasoning_content") for d in deltas[first_call:])   # the call comes last


def test_refusals_on_a_harmony_model(app_client):
    _, client = app_client
    base = {"model": "m", "messages": ASK, "tools": [WEATHER], "max_tokens": 8}
    r = client.post("/v1/chat/completions", json={**base, "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice" and "nope" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json={**base, "messages": ASK + [{"role": "tool", "tool_call_id": "x", "content": "1"}]})
    assert r.status_code == 400 and "no assistant message" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json={**base, "temperature": 0})
    assert r.status_code == 200                                                # and it keeps serving


def test_openai_sdk_tool_loop_on_a_real_server(harmony_model):
    "The openai SDK against `llmbook serve --model` (a subprocess): a forced call, its result sent back, an answer."
    openai = pytest.importorskip("openai"); pytest.importorskip("uvicorn")
    from conftest import serve_process
    with serve_process("--model", harmony_model, "--parallel", 1, "--n-ctx", N_CTX, "--threads", 2) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=180)
        messages = list(CALL_ASK)
        r = client.chat.completions.create(model="x", messages=messages, tools=[WEATHER], tool_choice="required",
                                           temperature=0, max_tokens=120)
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls" and msg.tool_calls[0].function.name == "get_weather"
        city = json.loads(msg.tool_calls[0].function.arguments)["city"]
        messages.append(msg.model_dump(exclude_none=True))       # with reasoning_content, if it reasoned: the server takes it
        messages.append({"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": json.dumps({"city": city, "sky": "cloudy"})})
        r2 = client.chat.completions.create(model="x", messages=messages, tools=[WEATHER], temperature=0, max_tokens=16)
        assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls")
        assert r2.usage.prompt_tokens > r.usage.prompt_tokens + len(msg.tool_calls[0].function.arguments) // 4
        # the same conversation, rendered in-process, holds the call and its result in harmony's layout
        m = llmbook.load(harmony_model, n_ctx=N_CTX)
        text = prompt_text(m, json.loads(json.dumps(messages)), [WEATHER])
        assert f'<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{msg.tool_calls[0].function.arguments}<|call|>' \
               f'<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>' in text


def test_grammar_on_harmony_s_control_tokens(tmp_path):
    "gpt-oss's markers are single control tokens: the grammar takes them as their text, and ends only at <|call|> or <|return|>."
    from test_gptoss import marker_tokenizer
    tok, _ = marker_tokenizer(tmp_path)
    ids = lambda text: tok.encode(text, add_special=False, parse_special=True)
    call_id, end_id = ids("<|call|>")[0], ids("<|end|>")[0]
    assert tok.is_eog(call_id) and not tok.is_eog(end_id)                    # gpt-oss: <|end|> only ends a message
    reply = THINK + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}'
    m = tool_grammar(plan_of(WEATHER, choice="required")).matcher(tok)
    for t in ids(reply):
        assert m.allows(t), tok.tokens[t]
        assert not m.allows(call_id)                                         # no end before the arguments are whole
        m.accept(t)
    assert m.allows(call_id) and not m.allows(end_id)
    assert sum(t >= tok.n_vocab - 7 for t in ids(reply)) == 7                # its markers went in as control tokens
