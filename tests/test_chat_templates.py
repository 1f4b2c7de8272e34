"""Chat templates of the families of issue 15 (ChatML, Qwen 2.5, Qwen 3, Phi-3, Phi-3.5, Gemma 2, Llama 3.1, Mistral)
against llama.cpp: the text `render_chat` makes and the token ids `chat_prompt` makes, for several conversations
(tests/fixtures/chat_templates.json, made by tools/make_chat_fixtures.py; its docstring says which llama.cpp
rendering is the reference and why). Issue 40: the built-in templates (`CHAT_TEMPLATES`) against llama.cpp's C++
built-ins of the same names and the families' own templates (tests/fixtures/chat_builtins.json, made by
tools/make_chat_builtin_fixtures.py), `template=` as a name, a file or text, and the fallback by architecture."""
import sys, types, warnings
from pathlib import Path
from types import SimpleNamespace
import pytest

from conftest import load_fixture, smollm2_file, gemma3_file
from llmbook.gguf import GGUFFile
from llmbook.generate import LLM
from llmbook.chat import (ChatTemplateError, render_chat, CHAT_TEMPLATES, FALLBACK_BY_ARCH, resolve_template,
                          fallback_template)
from llmbook.tokenizer import Tokenizer
from llmbook.tokenizer_extras import EXTRAS

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import chat_vocab_metadata

FX = load_fixture("chat_templates.json")
BX = load_fixture("chat_builtins.json")
CASES = [(name, i) for name, t in FX["templates"].items() for i in range(len(t["cases"]))]


def case_id(c): return f"{c[0]}-{FX['templates'][c[0]]['cases'][c[1]]['conversation']}-{'gen' if FX['templates'][c[0]]['cases'][c[1]]['add_generation_prompt'] else 'nogen'}"


_TOKENIZERS = {}
def tokenizer(vocab: str) -> Tokenizer:
    if vocab not in _TOKENIZERS:
        if vocab in ("smollm2", "gemma3"):
            path = smollm2_file() if vocab == "smollm2" else gemma3_file()
            if path is None: pytest.fail(f"{vocab} is not installed (tools/setup.sh --dev installs it)")
            with GGUFFile(path) as f: _TOKENIZERS[vocab] = Tokenizer.from_gguf(f)
        else: _TOKENIZERS[vocab] = Tokenizer(chat_vocab_metadata(vocab), EXTRAS)   # phi3's name-keyed rule among them
    return _TOKENIZERS[vocab]


def fake_llm(tok, name, metadata=None):
    "Enough of an LLM for `chat_prompt`: a tokenizer, a file's metadata and path, and `chat_template`."
    fake = SimpleNamespace(tokenizer=tok, gguf=SimpleNamespace(metadata=metadata or {}, path=f"{name}.gguf"))
    fake.chat_template = types.MethodType(LLM.chat_template, fake)
    return fake


@pytest.mark.parametrize("name, i", CASES, ids=[case_id(c) for c in CASES])
def test_render_and_ids_match_llama_cpp(name, i):
    t = FX["templates"][name]
    c = t["cases"][i]
    msgs = FX["conversations"][c["conversation"]]
    if "error" in c:      # llama.cpp's template refused (e.g. Gemma 2 with only a system message, merged into nothing)
        with pytest.raises(ChatTemplateError): render_chat(t["template"], msgs, c["add_generation_prompt"],
                                                           bos_token=t["bos_token"], eos_token=t["eos_token"])
        return
    text = render_chat(t["template"], msgs, c["add_generation_prompt"], bos_token=t["bos_token"], eos_token=t["eos_token"])
    assert text == c["text"]
    tok = tokenizer(t["vocab"])
    ids = LLM.chat_prompt(fake_llm(tok, name), msgs, template=t["template"], add_generation_prompt=c["add_generation_prompt"])
    assert ids == c["ids"]


def test_fixture_covers_the_families():
    assert {"qwen2.5", "qwen3", "phi3.5", "gemma2", "llama3.1", "mistral-nemo"} <= set(FX["templates"])
    g = FX["templates"]["gemma2"]["cases"]
    merged = [c for c in g if c["conversation"] == "system_user" and c["add_generation_prompt"]][0]
    assert FX["conversations"]["system_user"][0]["content"] + "\n" in merged["text"]   # the system message merged


def test_builtin_formats_that_differ_from_the_template():
    "For the record: llama.cpp's hard-coded llama_chat_apply_template agrees with the template's own text only sometimes."
    same = {n: sum(c.get("text") == c["builtin"].get("text") for c in t["cases"]) for n, t in FX["templates"].items()}
    assert same["chatml-smollm2"] > 0 and same["gemma2"] == 0


# ---------------------------------------------------------------- issue 40: built-in templates, template=, fallback
BCASES = [(name, i) for name, t in BX["builtins"].items() for i in range(len(t["cases"]))]

def bcase_id(c):
    case = BX["builtins"][c[0]]["cases"][c[1]]
    return f"{c[0]}-{case['conversation']}-{'gen' if case['add_generation_prompt'] else 'nogen'}"


@pytest.mark.parametrize("name, i", BCASES, ids=[bcase_id(c) for c in BCASES])
def test_builtin_matches_llama_cpp(name, i):
    "Each built-in lays each conversation out as llama.cpp's C++ built-in of that name (plus the BOS text where the"
    " family's template writes it), as the family's own template where the fixture has it, and to llama.cpp's ids."
    b = BX["builtins"][name]
    c = b["cases"][i]
    msgs = BX["conversations"][c["conversation"]]
    text = render_chat(CHAT_TEMPLATES[name], msgs, c["add_generation_prompt"], bos_token=b["bos_token"],
                       eos_token=b["eos_token"])
    assert text == c["text"]
    if "family" in c: assert text == c["family"]
    ids = LLM.chat_prompt(fake_llm(tokenizer(b["vocab"]), name), msgs, template=name,
                          add_generation_prompt=c["add_generation_prompt"])
    assert ids == c["ids"]


def test_builtins_all_in_the_fixture():
    assert set(BX["builtins"]) == set(CHAT_TEMPLATES)
    assert {"chatml", "llama3", "gemma", "phi3", "mistral-v7", "mistral-v3", "llama2", "qwen"} <= set(CHAT_TEMPLATES)
    assert CHAT_TEMPLATES["qwen"] == CHAT_TEMPLATES["chatml"]
    convs = {c["conversation"] for c in BX["builtins"]["gemma"]["cases"]}
    assert {"system_multi_turn", "multi_turn"} <= convs          # system, user, assistant, user; and without a system


def test_template_by_name_file_or_text(tmp_path, monkeypatch):
    assert resolve_template("gemma") == (CHAT_TEMPLATES["gemma"], "built-in gemma")
    f = tmp_path / "mine.jinja"
    f.write_text("{% for m in messages %}{{ m.content }}|{% endfor %}")
    text, how = resolve_template(str(f))
    assert text == f.read_text() and how == f"the file {f}"
    assert resolve_template("{{ messages[0].content }}") == ("{{ messages[0].content }}", "the template text given")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chatml").write_text("{{ 'not this' }}")          # a name wins over a file of the same name
    assert resolve_template("chatml")[0] == CHAT_TEMPLATES["chatml"]
    for bad in ("gemma4", "no/such/file.jinja", "plain words"):
        with pytest.raises(ChatTemplateError) as e: resolve_template(bad)
        assert "unknown chat template" in str(e.value) and all(n in str(e.value) for n in CHAT_TEMPLATES)
    msgs = [{"role": "user", "content": "Hi"}]
    fake = fake_llm(tokenizer("smollm2"), "x")
    by_name = fake.chat_template("chatml")[0]
    (tmp_path / "c.jinja").write_text(by_name)
    assert (LLM.chat_prompt(fake, msgs, template="chatml") == LLM.chat_prompt(fake, msgs, template=str(tmp_path / "c.jinja"))
            == LLM.chat_prompt(fake, msgs, template=by_name))


def test_fallback_by_architecture():
    for arch in ("gemma", "gemma2", "gemma3"): assert fallback_template(arch, {})[0] == "gemma"
    assert fallback_template("phi3", {})[0] == "phi3"
    for arch in ("qwen2", "qwen3", "qwen3moe"): assert fallback_template(arch, {})[0] == "chatml"
    assert fallback_template("llama", {"<|start_header_id|>": 1, "[INST]": 2})[0] == "llama3"
    assert fallback_template("llama", {"[INST]": 1, "[SYSTEM_PROMPT]": 2})[0] == "mistral-v7"
    assert fallback_template("llama", {"[INST]": 1})[0] == "mistral-v3"
    assert fallback_template("llama", {"<s>": 1})[0] == "chatml"
    assert fallback_template("olmoe", {})[0] == "chatml"           # anything else: ChatML, as llama.cpp's server
    assert set(FALLBACK_BY_ARCH.values()) <= set(CHAT_TEMPLATES)


def test_gemma3_chats_with_the_fallback(gemma3_path):
    import llmbook
    m = llmbook.load(gemma3_path)
    assert "tokenizer.chat_template" not in m.gguf.metadata
    text, how = m.chat_template()
    assert text == CHAT_TEMPLATES["gemma"] and how.startswith("built-in gemma, chosen by architecture gemma3")
    msgs = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Hi"}]
    with pytest.warns(UserWarning, match="built-in gemma, chosen by architecture gemma3"): ids = m.chat_prompt(msgs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                              # said once per model
        assert m.chat_prompt(msgs) == ids == m.chat_prompt(msgs, template="gemma")
        family = render_chat(BX["builtins"]["gemma"]["family_template"], msgs, bos_token="<bos>")   # Gemma 3's own
        assert family == "<bos><start_of_turn>user\nAnswer in one word.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
        assert ids == m.tokenizer.encode(family, add_special=False, parse_special=True)
        answer = m.chat([{"role": "user", "content": "Hi"}], max_tokens=3)
    assert answer.n_prompt == len(m.chat_prompt([{"role": "user", "content": "Hi"}])) and len(answer.tokens) >= 1


def test_a_file_with_a_template_uses_its_own(smollm2_path):
    from llmbook.gguf import GGUFFile
    m = LLM(GGUFFile(smollm2_path))
    own = m.gguf.metadata["tokenizer.chat_template"]
    assert m.chat_template() == (own, "the file's (tokenizer.chat_template)")
    msgs = [{"role": "user", "content": "Hi"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = m.chat_prompt(msgs)
    assert ids == m.chat_prompt(msgs, template=own) != m.chat_prompt(msgs, template="chatml")   # SmolLM2's adds a system turn
