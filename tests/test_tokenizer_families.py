"""Pre-tokenizers and per-model tokenizer rules of issue 15 against llama.cpp.

- tokenizer_pre_variants.json: SmolLM2's vocabulary under every `tokenizer.ggml.pre` name we implement (tekken,
  gpt-4o, qwen35, ...), written by our GGUFWriter and tokenized by llama.cpp; and SentencePiece chat vocabularies
  (tools/family_models.CHAT_VOCABS), among them a "Phi-3" one whose special tokens take the whitespace after them.
- with LLAMA_CPP_SRC (a llama.cpp source tree, e.g. the llama-cpp-python sdist's vendor/llama.cpp): llama.cpp's own
  test vocabularies models/ggml-vocab-*.gguf on its test strings (.inp), against its expected ids (.out) and against
  llama.cpp's actual ids (tokenizer_llama_cpp_vocabs.json).
Made by tools/make_tokenizer_fixtures.py."""
import hashlib, os, sys
from pathlib import Path
import pytest

from conftest import load_fixture, smollm2_file
from llmbook.gguf import GGUFFile
from llmbook.tokenizer import Tokenizer, TokenizerError, TokenAttr, pre_tokenize
from llmbook.tokenizer_extras import EXTRAS, PRE_TOKENIZERS

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import chat_vocab_metadata
from make_tokenizer_fixtures import PRE_NAMES, read_inp

FX = load_fixture("tokenizer_pre_variants.json")


def fixture_bytes(d: dict) -> bytes:
    return d["text"].encode("utf-8") if "text" in d else bytes.fromhex(d["hex"])


@pytest.fixture(scope="module")
def smollm2_metadata():
    path = smollm2_file()
    if path is None: pytest.fail("SmolLM2 is not installed (tools/setup.sh --dev installs it)")
    with GGUFFile(path) as f: return dict(f.metadata)


def variant(name):
    v = FX["variants"][name]
    return FX["variants"][v["same_as"]] if "same_as" in v else v


def test_every_name_we_know_is_in_the_fixture():
    assert sorted(PRE_TOKENIZERS) == sorted(PRE_NAMES)


@pytest.mark.parametrize("pre", PRE_NAMES)
def test_pre_tokenizer_names(smollm2_metadata, pre):
    "Each name: llama.cpp's ids on the hard strings, its detokenized text (clean_spaces) and its BOS default."
    md = {k: v for k, v in smollm2_metadata.items() if k != "tokenizer.ggml.add_bos_token"}
    tok = Tokenizer({**md, "tokenizer.ggml.pre": pre}, EXTRAS)
    fx = variant(pre)
    assert tok.add_bos == fx["add_bos"]
    assert tok.encode(FX["strings"][0], add_special=True) == fx["bos_ids"]
    bad = [(t[:40], got[:8], want[:8]) for t, want in zip(FX["strings"], fx["ids"])
           if (got := tok.encode(t, add_special=False)) != want]
    assert not bad, f"{pre}: {len(bad)} of {len(fx['ids'])} strings differ, e.g. {bad[:3]}"
    for ids, d in zip(fx["ids"], fx["detok"]):
        assert tok.decode_bytes(ids) == fixture_bytes(d)


def test_case_splitting_patterns():
    "tekken / gpt-4o cut at lower-to-upper changes; llama.cpp's approximation makes non-ASCII letters both cases."
    assert pre_tokenize("camelCase HTMLParser", PRE_TOKENIZERS["tekken"]) == ["camel", "Case", " HTMLParser"]
    assert pre_tokenize("aÉb", PRE_TOKENIZERS["gpt-4o"]) == ["aÉb"]
    assert pre_tokenize("I'M 12345", PRE_TOKENIZERS["gpt-4o"]) == ["I'M", " ", "123", "45"]
    assert pre_tokenize("I'M 12345", PRE_TOKENIZERS["tekken"]) == ["I", "'M", " ", *"12345"]
    assert pre_tokenize("e\u0301te", PRE_TOKENIZERS["qwen35"]) == ["e\u0301te"]
    assert pre_tokenize("e\u0301te", PRE_TOKENIZERS["qwen2"]) == ["e", "\u0301te"]   # the mark is the optional prefix


@pytest.mark.parametrize("family", ["phi3", "llama3", "mistral"])
def test_spm_chat_vocabularies(family):
    "SentencePiece vocabularies with chat tokens; under the name Phi-3, llama.cpp's RSTRIP rule."
    fx = FX["spm_vocabs"][family]
    tok = Tokenizer(chat_vocab_metadata(family), EXTRAS)
    assert [int(a) for a in tok.attrs] == fx["attrs"]
    if family == "phi3": assert tok.attrs[tok.token_id["<|user|>"]] & TokenAttr.RSTRIP
    bad = [(c["text"][:40], c["add_special"], c["parse_special"]) for c in fx["cases"]
           if tok.encode(c["text"], c["add_special"], c["parse_special"]) != c["ids"]]
    assert not bad, f"{len(bad)} of {len(fx['cases'])} differ, e.g. {bad[:3]}"


def test_phi3_rule_needs_the_name():
    md = chat_vocab_metadata("phi3")
    with_name = Tokenizer(md, EXTRAS).encode("<|user|>\nHi", parse_special=True)
    without = Tokenizer({**md, "general.name": "some model"}, EXTRAS).encode("<|user|>\nHi", parse_special=True)
    assert len(without) > len(with_name)
    assert Tokenizer(md).encode("<|user|>\nHi", parse_special=True) == without    # chapter 08 alone: no per-model rules


# ---------------------------------------------------------------- llama.cpp's own test vocabularies
LLAMA_CPP_SRC = os.environ.get("LLAMA_CPP_SRC")
needs_src = pytest.mark.skipif(not LLAMA_CPP_SRC, reason="LLAMA_CPP_SRC (a llama.cpp source tree with models/ggml-vocab-*.gguf) is not set")
VOCABS = load_fixture("tokenizer_llama_cpp_vocabs.json")["vocabs"]


@needs_src
@pytest.mark.parametrize("name", sorted(VOCABS))
def test_llama_cpp_test_vocabularies(name):
    path = Path(LLAMA_CPP_SRC) / "models" / name
    if not path.exists(): pytest.skip(f"{path} is missing")
    fx = VOCABS[name]
    try:
        with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f, EXTRAS)
    except TokenizerError as e: pytest.skip(f"not supported by llmbook: {e}")
    texts = read_inp(path.with_name(name + ".inp"))
    want_out = [[int(x) for x in line.split()] for line in path.with_name(name + ".out").read_text().split("\n")[:len(texts)]]
    if hashlib.sha256(path.read_bytes()).hexdigest() != fx["sha256"]:
        pytest.skip("this llama.cpp tree's vocabulary differs from the fixture's")
    ours = [tok.encode(t, add_special=False) for t in texts]
    assert [i for i, (a, b) in enumerate(zip(ours, fx["ids"])) if a != b] == [], "differs from llama.cpp"
    assert [i for i, (a, b) in enumerate(zip(ours, want_out)) if a != b] == [], "differs from the .out file"
    assert [tok.encode(t, True, True) for t in FX_CHAT] == fx["chat"]


from make_tokenizer_fixtures import SPM_CHAT_TESTS as FX_CHAT


def test_load_hands_the_extras_to_the_tokenizer():
    "Chapter 23's `load` passes the tokenizers chapter's EXTRAS, so every name above opens; chapter 08 alone knows two."
    import llmbook
    assert llmbook.load(n_ctx=32).tokenizer.extras is EXTRAS
