"""Issue 27: `llmbook serve` driven by real clients nobody here wrote: LangChain's ChatOpenAI (invoke, stream, batch,
with_structured_output both ways) and OpenAIEmbeddings, instructor in its JSON-schema and tools modes, and the openai
SDK's tool-call loop. The real server runs in a subprocess with an API key (`--api-key`), on the embedded SmolLM2;
few tokens each, so that the module stays quick. Tool calls are asked for with tool_choice required or named where the
test needs a call: a 135M model, left free, often answers in prose."""
import json, subprocess, time
import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="the client tests need the dev extras")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")
from pydantic import BaseModel, Field
from conftest import serve_process
import llmbook as lb
from llmbook.serve import embed

KEY, N_CTX = "test-key-27", 1024



@pytest.fixture(scope="module")
def server():
    with serve_process("--parallel", 2, "--n-ctx", N_CTX, "--threads", 2, "--api-key", KEY) as url: yield url


@pytest.fixture(scope="module")
def model():
    return lb.load(n_ctx=N_CTX)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=120)


def lc_chat(server, max_tokens: int):
    lc = pytest.importorskip("langchain_openai")
    return lc.ChatOpenAI(base_url=server + "/v1", api_key=KEY, model="smollm2", temperature=0, max_tokens=max_tokens,
                         max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def chat_model(server):
    return lc_chat(server, 12)


class Person(BaseModel):
    name: str = Field(max_length=20)
    age: int


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather now in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}}}


def test_langchain_invoke_stream_batch(chat_model, model):
    text = chat_model.invoke("Name a colour.").content
    assert text == str(model.chat([{"role": "user", "content": "Name a colour."}], max_tokens=12))
    assert "".join(c.content for c in chat_model.stream("Name a colour.")) == text
    prompts = ["Name a colour.", "Name a planet."]
    assert [m.content for m in chat_model.batch(prompts, config={"max_concurrency": 2})] == \
           [chat_model.invoke(p).content for p in prompts]


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_structured_output(server, method):
    "json_schema: response_format; function_calling: a tool call named by tool_choice. Both parse into the class."
    p = lc_chat(server, 60).with_structured_output(Person, method=method).invoke(
        "Invent a person: a name and an age.")
    assert isinstance(p, Person) and p.name and len(p.name) <= 20


def test_langchain_embeddings(server, model):
    lc = pytest.importorskip("langchain_openai")
    emb = lc.OpenAIEmbeddings(base_url=server + "/v1", api_key=KEY, model="smollm2", check_embedding_ctx_length=False)
    texts = ["The cat sat on the mat.", "Water boils at 100 degrees."]
    docs, query = np.array(emb.embed_documents(texts)), np.array(emb.embed_query(texts[0]))
    mine = embed(model, texts)
    assert docs.shape == mine.shape and np.allclose(docs, mine, atol=1e-6) and np.allclose(query, mine[0], atol=1e-6)


@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
def test_instructor(client, mode):
    instructor = pytest.importorskip("instructor")
    ic = instructor.from_openai(client, mode=getattr(instructor.Mode, mode))
    p = ic.chat.completions.create(model="smollm2", response_model=Person, max_tokens=60, temperature=0, max_retries=0,
                                   messages=[{"role": "user", "content": "Invent a person: a name and an age."}])
    assert isinstance(p, Person) and p.name and len(p.name) <= 20


def test_openai_two_step_tool_loop(client):
    "Ask, get a call (required), run it, send the result back, get the answer in prose."
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model="smollm2", messages=messages, tools=[WEATHER], tool_choice="required",
                                       temperature=0, max_tokens=40)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    args = json.loads(call.function.arguments)
    assert call.function.name == "get_weather" and isinstance(args["city"], str) and call.id
    messages += [choice.message, {"role": "tool", "tool_call_id": call.id,
                                  "content": json.dumps({"city": args["city"], "sky": "cloudy", "temperature_c": 18})}]
    r = client.chat.completions.create(model="smollm2", messages=messages, tools=[WEATHER], tool_choice="none",
                                       temperature=0, max_tokens=40)
    assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].message.content
    assert not r.choices[0].message.tool_calls
