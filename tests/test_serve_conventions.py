"""`llmbook serve` as llama-server's users expect it (issue 40): the seed of a sampled answer comes back so that the
answer can be asked for again, `--chat-template` names the template, and a model whose file has none (Gemma 3)
chats through its family's built-in. Through HTTP, on real server processes."""
import json
import httpx
import pytest
from conftest import serve_process, llmbook
from llmbook.loading import load

ASK = {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 12}


def test_a_random_seed_comes_back_and_repeats_the_answer():
    with serve_process("--parallel", 1) as url:
        a = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "temperature": 0.9}, timeout=120).json()
        b = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "temperature": 0.9, "seed": a["seed"]}, timeout=120).json()
        assert isinstance(a["seed"], int) and 0 <= a["seed"] < 2**32 and b["seed"] == a["seed"]
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
        chunks = [json.loads(line[6:]) for line in httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
                      **ASK, "temperature": 0.9, "seed": a["seed"], "stream": True}).text.splitlines()
                  if line.startswith("data: {")]
        assert chunks[-1]["seed"] == a["seed"]
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == a["choices"][0]["message"]["content"]
        greedy = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "temperature": 0}, timeout=120).json()
        assert greedy["seed"] == 0                                        # greedy draws nothing: seed 0, as the library's


def test_chat_template_by_name(smollm2_path):
    with serve_process("--parallel", 1, "--chat-template", "llama3") as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "temperature": 0}, timeout=120).json()
    want = load(smollm2_path).chat(ASK["messages"], max_tokens=12, template="llama3")
    assert r["choices"][0]["message"]["content"] == str(want)


def test_unknown_chat_template_fails_before_serving():
    r = llmbook("serve", "--chat-template", "nonesuch", "--port", 1)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "unknown chat template 'nonesuch'" in r.stderr, r.stderr


def test_gemma3_chats_through_the_server(gemma3_path):
    with serve_process("--parallel", 1, "--model", gemma3_path) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text
    want = load(gemma3_path).chat(ASK["messages"], max_tokens=12, template="gemma")
    assert r.json()["choices"][0]["message"]["content"] == str(want) and str(want).strip()
