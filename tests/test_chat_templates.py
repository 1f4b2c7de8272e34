"""Chat templates of the families of issue 15 (ChatML, Qwen 2.5, Qwen 3, Phi-3, Phi-3.5, Gemma 2, Llama 3.1, Mistral)
against llama.cpp: the text `render_chat` makes and the token ids `chat_prompt` makes, for several conversations
(tests/fixtures/chat_templates.json, made by tools/make_chat_fixtures.py; its docstring says which llama.cpp
rendering is the reference and why)."""
import sys
from pathlib import Path
from types import SimpleNamespace
import pytest

from conftest import load_fixture, smollm2_file, gemma3_file
from llmbook.gguf import GGUFFile
from llmbook.generate import LLM
from llmbook.chat import ChatTemplateError, render_chat
from llmbook.tokenizer import Tokenizer
from llmbook.tokenizer_extras import EXTRAS

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import chat_vocab_metadata

FX = load_fixture("chat_templates.json")
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
    fake = SimpleNamespace(tokenizer=tok, gguf=SimpleNamespace(metadata={}, path=f"{name}.gguf"))
    ids = LLM.chat_prompt(fake, msgs, template=t["template"], add_generation_prompt=c["add_generation_prompt"])
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
