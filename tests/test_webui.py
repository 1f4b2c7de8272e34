"""The chat page of `llmbook serve` (issue 39) in a real browser: the real server in a subprocess with the embedded
SmolLM2, Debian's headless Chromium driven by Playwright, the network outside 127.0.0.1 cut off. Screenshots go to
tests/artifacts/ (gitignored); with LLMBOOK_UPDATE_IMAGES=1 the book's picture of the page, nbs/images/serve_webui.png,
is made again from this run."""
import json, os, shutil, subprocess, sys, time, zipfile
from importlib.resources import files
from pathlib import Path
import pytest

httpx = pytest.importorskip("httpx", reason="the server tests need the dev extras (httpx, fastapi, uvicorn)")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from conftest import serve_process

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
BOOK_IMAGE = ROOT / "nbs" / "images" / "serve_webui.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
N_CTX, KEY = 512, "s3cret-key"


# ---- The page as a file: small, shipped with the package, read only by the server.

def test_the_page_is_small_and_ships_with_the_package(tmp_path):
    page = files("llmbook").joinpath("webui", "index.html").read_bytes()
    assert len(page) < 200_000, f"the chat page weighs {len(page) / 1000:.0f} kB"
    assert b"http://" not in page.replace(b"http://127.0.0.1", b"") and b"https://" not in page   # nothing to fetch
    # a non-editable install has it too: build a wheel from a copy of the sources
    src = tmp_path / "src"
    shutil.copytree(ROOT / "llmbook", src / "llmbook", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "settings.ini", "pyproject.toml", "README.md"): shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, capture_output=True)
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("llmbook-*.whl")))
    assert wheel.read("llmbook/webui/index.html") == page


def test_import_llmbook_does_not_read_the_page():
    code = ("import json, sys\nopened = []\n"
            "sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == 'open' else None)\n"
            "import llmbook\n"
            "print(json.dumps({'webui': [p for p in opened if 'webui' in p], 'serve': 'llmbook.serve' in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"webui": [], "serve": False}


# ---- The page in Chromium, against the real server.

@pytest.fixture(scope="module")
def server():
    with serve_process("--parallel", 2, "--n-ctx", N_CTX, "--threads", 2) as url: yield url


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists(): pytest.skip(f"no Chromium at {CHROMIUM} (tools/setup.sh --dev installs Debian's)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def offline_context(browser):
    """A browser context (its own local storage, as a fresh profile) where every request to anywhere but 127.0.0.1 is
    aborted and recorded in `context.outside`."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.outside = []
    def route(r):
        host = r.request.url.split("/")[2].split(":")[0] if "://" in r.request.url else ""
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1": return r.continue_()
        context.outside.append(r.request.url); r.abort()
    context.route("**/*", route)
    context.set_default_timeout(60_000)
    return context


@pytest.fixture
def context(browser, request):
    ctx = offline_context(browser)
    yield ctx
    ARTIFACTS.mkdir(exist_ok=True)
    for i, p in enumerate(ctx.pages):                     # how each tab looked at the end, for a person to look at
        try: p.screenshot(path=str(ARTIFACTS / f"webui_{request.node.name}_{i}.png"), timeout=10_000)
        except Exception as e: print(f"no screenshot of tab {i}: {e}")   # (a picture, not a check)
    assert ctx.outside == [], f"the page tried to reach the network: {ctx.outside}"
    ctx.close()


def open_page(context, url, **settings):
    "A new tab on the chat page, its settings boxes filled in (name -> text), once the model's name is shown."
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url + "/")
    if settings:
        if not page.locator("#settings").is_visible(): page.click("#settings-button")
        for name, value in settings.items():
            if name == "format": page.select_option("#format", value)
            else: page.fill(f"#{name}", str(value))
    return page


def wait_model_shown(page):
    page.locator("#model-name", has_text="SmolLM2").wait_for()


def send(page, text):
    page.fill("#input", text)
    page.press("#input", "Enter")


def last_answer(page):
    return page.locator(".msg.assistant").last


def wait_answer(page, timeout=60_000):
    "The last answer once it has ended (done, stopped or error); fails on an error."
    answer = last_answer(page)
    page.wait_for_function("() => { const m = [...document.querySelectorAll('.msg.assistant')].pop();"
                           " return m && m.dataset.state !== 'streaming'; }", timeout=timeout)
    assert answer.get_attribute("data-state") == "done", answer.inner_text()
    return answer


def stored_chats(page) -> list:
    return page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith('llmbook.chat.'))"
                         ".map(k => JSON.parse(localStorage.getItem(k)))")


def health(url) -> dict:
    return httpx.get(url + "/health", timeout=5).json()


def wait_idle(url, timeout=10.0) -> float:
    t0 = time.time()
    while time.time() - t0 < timeout:
        h = health(url)
        if h["slots_processing"] == 0 and h["requests_waiting"] == 0: return time.time() - t0
        time.sleep(0.02)
    pytest.fail(f"slots still busy after {timeout} s: {h}")


def greedy_answer(url, content, max_tokens) -> str:
    "The server's answer to one user message, asked directly (greedy: the page's answer at temperature 0)."
    r = httpx.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": content}],
                                                       "max_tokens": max_tokens, "temperature": 0}, timeout=60)
    return r.json()["choices"][0]["message"]["content"]


def test_the_page_loads_offline_with_the_model_and_the_slots(server, context):
    page = open_page(context, server)
    wait_model_shown(page)
    assert page.title().startswith("SmolLM2-135M-Instruct")
    size = page.locator("#model-size").inner_text()
    assert "135M parameters" in size and "MB" in size and f"context {N_CTX} tokens" in size
    page.locator("#slots", has_text="0 of 2 slots busy").wait_for()
    assert page.errors == []
    r = httpx.get(server + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "connect-src 'self'" in r.headers["content-security-policy"]


def test_a_message_streams_in_token_by_token_with_its_speed(server, context):
    wait_idle(server)
    page = open_page(context, server, temperature=0, max_tokens=24, top_k=40, top_p=0.9, min_p=0.05,
                     repeat_penalty=1.1, seed=7, system="You are brief.")
    wait_model_shown(page)
    # every change of the answer's text, as the page makes it
    page.evaluate("""() => { window.lengths = [];
        new MutationObserver(() => { const m = [...document.querySelectorAll('.msg.assistant')].pop();
            if (m) window.lengths.push(m.querySelector('.body').textContent.length); })
        .observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true}); }""")
    with page.expect_request("**/v1/chat/completions") as req:
        send(page, "Write a sentence about the sea.")
    answer = wait_answer(page)
    body = json.loads(req.value.post_data)
    assert body["messages"] == [{"role": "system", "content": "You are brief."},
                                {"role": "user", "content": "Write a sentence about the sea."}]
    assert {k: body[k] for k in ("temperature", "max_tokens", "top_k", "top_p", "min_p", "repeat_penalty", "seed", "stream")} == \
           {"temperature": 0, "max_tokens": 24, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.1, "seed": 7, "stream": True}
    assert body["logprobs"] is True and body["top_logprobs"] == 5 and body["stream_options"] == {"include_usage": True}
    lengths = [n for n in page.evaluate("window.lengths") if n > 0]
    grew = [b for a, b in zip(lengths, lengths[1:]) if b > a]
    assert len(grew) >= 5, f"the text did not grow piece by piece: {lengths}"
    assert lengths == sorted(lengths)
    stats = answer.locator(".stats").inner_text()
    assert "tokens/s" in stats and "first token after" in stats and "tokens" in stats
    assert page.locator("#context").inner_text().endswith(f"of {N_CTX} tokens")
    # the conversation is in local storage, and a reload shows it again
    chats = stored_chats(page)
    assert len(chats) == 1 and chats[0]["messages"][1]["content"] == answer.locator(".body").inner_text().strip()
    page.reload(); wait_model_shown(page)
    assert last_answer(page).locator(".body").inner_text() == answer.locator(".body").inner_text()
    assert page.errors == []


def test_stop_ends_the_stream_and_frees_the_slot(server, context):
    wait_idle(server)
    page = open_page(context, server, temperature=0, max_tokens=400)
    wait_model_shown(page)
    send(page, "Tell me a very long story about a dragon.")
    page.wait_for_function("() => { const m = [...document.querySelectorAll('.msg.assistant')].pop();"
                           " return m && m.querySelector('.body').textContent.length > 40; }")
    assert health(server)["slots_processing"] == 1
    page.click("#stop")
    t0 = time.time()
    wait_idle(server, timeout=5)
    assert time.time() - t0 < 1.0, f"the slot was busy {time.time() - t0:.2f} s after Stop"
    answer = last_answer(page)
    assert answer.get_attribute("data-state") == "stopped"
    text = answer.locator(".body").inner_text()
    time.sleep(0.5)
    assert answer.locator(".body").inner_text() == text            # nothing more arrives
    assert "stopped" in answer.locator(".stats").inner_text() and page.locator("#send").is_visible()
    # the slot is free for the next message
    page.fill("#max_tokens", "4")
    send(page, "Hi")
    wait_answer(page)


def test_token_probabilities_and_their_alternatives(server, context):
    wait_idle(server)
    page = open_page(context, server, temperature=0, max_tokens=48)
    wait_model_shown(page)
    send(page, "Why is the sky blue? Answer in one sentence.")
    wait_answer(page)
    page.check("#show-probs")
    tokens = last_answer(page).locator(".tok")
    n = tokens.count()
    assert n >= 3
    probs = [float(tokens.nth(i).get_attribute("data-p")) for i in range(n)]
    assert all(0 < p <= 1 for p in probs)
    tokens.nth(1).hover()
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    rows = tip.locator("tr")
    alternatives = [float(rows.nth(i).get_attribute("data-p")) for i in range(rows.count())]
    assert len(alternatives) == 5 and sum(alternatives) <= 1 + 1e-6 and alternatives == sorted(alternatives, reverse=True)
    # greedy: the drawn token is the most likely one, first in the list, with its own probability
    assert "drawn" in (rows.first.get_attribute("class") or "") and abs(alternatives[0] - probs[1]) < 1e-3
    # a tap pins the alternatives of another token
    tokens.nth(2).click()
    assert "token 3:" in tip.inner_text()
    # the book's picture: the alternatives where the model was least sure
    unsure = min(range(n), key=lambda i: probs[i])
    page.set_viewport_size({"width": 1200, "height": 540})
    tokens.nth(unsure).click()
    assert f"token {unsure + 1}:" in tip.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "webui.png"))
    if os.environ.get("LLMBOOK_UPDATE_IMAGES"): shutil.copy(ARTIFACTS / "webui.png", BOOK_IMAGE)
    assert page.errors == []


def test_a_json_schema_gives_valid_json(server, context):
    wait_idle(server)
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}, "sure": {"type": "boolean"}},
              "required": ["colour", "sure"], "additionalProperties": False}
    page = open_page(context, server, temperature=0, max_tokens=40, format="json_schema", constraint=json.dumps(schema))
    wait_model_shown(page)
    with page.expect_request("**/v1/chat/completions") as req:
        send(page, "What colour is the sky?")
    answer = wait_answer(page)
    assert json.loads(req.value.post_data)["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    value = json.loads(answer.locator(".body").inner_text())
    assert set(value) == {"colour", "sure"} and value["colour"] in ("red", "green", "blue") and isinstance(value["sure"], bool)
    # a schema that is not JSON is refused in the page, before any request
    page.fill("#constraint", "{not json")
    send(page, "Again?")
    assert "not JSON" in page.locator("#settings-error").inner_text()


HTML_REPLY = ('<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> **bold** '
              '[link](javascript:alert(1)) <b>raw</b>')


def test_a_reply_holding_html_is_shown_as_text(server, context):
    wait_idle(server)
    grammar = 'root ::= "' + HTML_REPLY.replace('"', '\\"') + '"'      # the real model made to write it (GBNF)
    page = open_page(context, server, temperature=0, max_tokens=120, format="gbnf", constraint=grammar)
    wait_model_shown(page)
    send(page, "Say something.")
    answer = wait_answer(page)
    def check_shown_as_text():
        assert page.evaluate("window.pwned") is None                   # no script ran, no handler fired
        assert page.locator("#messages script, #messages img, #messages b, #messages a").count() == 0
        assert "<script>window.pwned = 1</script>" in answer.inner_text() and '<img src=x onerror=' in answer.inner_text()
    check_shown_as_text()
    assert answer.locator("strong").inner_text() == "bold"               # markdown still formats
    page.check("#show-probs"); check_shown_as_text()                     # as tokens
    page.uncheck("#show-probs"); page.reload(); wait_model_shown(page)   # from local storage
    answer = last_answer(page); check_shown_as_text()
    assert page.errors == []


def test_the_markdown_renderer_builds_nodes_and_links_only_to_http(browser):
    "The renderer alone, on the page served by a stand-in (the API refused): headings, links, code, lists."
    page_html = files("llmbook").joinpath("webui", "index.html").read_text()
    context = browser.new_context()
    try:
        context.route("**/*", lambda r: r.fulfill(body=page_html, content_type="text/html") if r.request.url.endswith("/")
                      else r.fulfill(status=503, body="{}"))
        page = context.new_page()
        page.goto("http://127.0.0.1:9/")
        html = page.evaluate("""() => { const d = document.createElement('div'); markdown(
            "# Title\\n\\nSee [docs](https://example.org/x) and [bad](javascript:alert(1)), `a<b>`.\\n\\n" +
            "- one\\n- **two**\\n  - nested\\n\\n1. first\\n2. second\\n\\n```py\\nprint('<b>')\\n```", d); return d.innerHTML; }""")
    finally:
        context.close()
    assert '<h3>Title</h3>' in html
    assert '<a href="https://example.org/x" target="_blank" rel="noopener noreferrer nofollow">docs</a>' in html
    assert "[bad](javascript:alert(1))" in html and "javascript:alert(1)\"" not in html
    assert "<code>a&lt;b&gt;</code>" in html and "<strong>two</strong>" in html and "<li>nested</li>" in html
    assert "<ol start=\"1\"><li>first</li><li>second</li></ol>" in html
    assert "<pre><code data-lang=\"py\">print('&lt;b&gt;')</code></pre>" in html


def test_two_tabs_chatting_at_once_each_get_their_own_answer(server, context):
    wait_idle(server)
    questions = {"a": "Name a fruit and describe it.", "b": "Name a country and describe it."}
    pages = {k: open_page(context, server, temperature=0, max_tokens=32) for k in questions}
    for p in pages.values(): wait_model_shown(p)
    for k, p in pages.items(): send(p, questions[k])
    for p in pages.values(): wait_answer(p)
    chats = {c["messages"][0]["content"]: c for c in stored_chats(pages["a"])}
    assert set(chats) == set(questions.values())                       # two chats, each saved apart
    answers = {k: chats[q]["messages"][1] for k, q in questions.items()}
    assert answers["a"]["tStart"] < answers["b"]["tEnd"] and answers["b"]["tStart"] < answers["a"]["tEnd"]   # at once
    for k, p in pages.items():
        text = answers[k]["content"]
        assert text == greedy_answer(server, questions[k], 32)              # its own answer, as if alone
        assert last_answer(p).locator(".body").inner_text().strip() == text.strip()


@pytest.fixture(scope="module")
def keyed_server():
    with serve_process("--parallel", 1, "--n-ctx", 256, "--threads", 2, "--api-key", KEY) as url: yield url


def test_the_key_is_asked_for_once_and_kept_in_the_browser(keyed_server, context):
    assert httpx.get(keyed_server + "/v1/models").status_code == 401 and httpx.get(keyed_server + "/").status_code == 200
    page = open_page(context, keyed_server, temperature=0, max_tokens=4)
    dialog = page.locator("#key-dialog")
    dialog.wait_for(state="visible")
    page.fill("#key-input", "a wrong guess"); page.keyboard.press("Enter")
    page.locator("#key-error", has_text="not this server's").wait_for()    # asked again, saying why
    assert dialog.is_visible()
    page.fill("#key-input", KEY); page.keyboard.press("Enter")
    wait_model_shown(page)
    assert not dialog.is_visible()
    assert page.evaluate("JSON.parse(localStorage.getItem('llmbook.apiKey'))") == KEY
    send(page, "Hi")
    wait_answer(page)
    page.reload(); wait_model_shown(page)                                # kept: not asked again
    assert not dialog.is_visible()
    assert page.errors == []


def test_no_webui_leaves_the_root_to_the_api_alone():
    "`--no-webui` (make_app(webui=False)): `/` is a 404 in OpenAI's error shape; with the page on, `/` needs no key."
    import argparse
    import llmbook
    from llmbook.serve import BackgroundServer, free_port, make_app, serve_args
    p = argparse.ArgumentParser(); serve_args(p)
    assert p.parse_args([]).webui is True and p.parse_args(["--no-webui"]).webui is False
    model = llmbook.load(n_ctx=256)
    with BackgroundServer(make_app(model, n_slots=1, webui=False), port=free_port()) as s:
        r = httpx.get(s.url + "/")
        assert r.status_code == 404 and "error" in r.json() and httpx.get(s.url + "/health").status_code == 200
    with BackgroundServer(make_app(model, n_slots=1, api_key=KEY), port=free_port()) as s:
        assert httpx.get(s.url + "/").status_code == 200 and httpx.get(s.url + "/v1/models").status_code == 401
