"""The tokenizer against llama.cpp on the real models (fixtures made by tools/make_tokenizer_fixtures.py)."""
import hashlib
import pytest

from conftest import load_fixture, smollm2_file, gemma3_file
from llmbook.gguf import GGUFFile
from llmbook.tokenizer import Tokenizer, TokenizerError, StreamDecoder, TokenAttr, split_special, spm_merge, spm_ids
from llmbook.tokenizer_extras import EXTRAS

MODELS = {"smollm2": smollm2_file, "gemma3": gemma3_file}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    "(name, Tokenizer, fixture) for each real model."
    path = MODELS[request.param]()
    if path is None: pytest.fail(f"{request.param} is not installed (tools/setup.sh --dev installs it)")
    with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f)
    return request.param, tok, load_fixture(f"tokenizer_{request.param}.json")


def fixture_bytes(d: dict) -> bytes:
    return d["text"].encode("utf-8") if "text" in d else bytes.fromhex(d["hex"])


def test_fixture_is_for_this_model(model):
    name, tok, fx = model
    assert tok.n_vocab == fx["n_vocab"]
    assert len(fx["cases"]) > 80


def test_special_ids(model):
    _, tok, fx = model
    assert (tok.bos, tok.eos, tok.eot, tok.pad) == (fx["bos"], fx["eos"], fx["eot"], fx["pad"])
    assert (tok.add_bos, tok.add_eos) == (fx["add_bos"], fx["add_eos"])
    assert sorted(tok.eog_ids) == fx["eog_ids"]
    assert all(tok.is_eog(t) for t in fx["eog_ids"])


def test_token_attributes(model):
    _, tok, fx = model
    ours = [[t, int(a)] for t, a in enumerate(tok.attrs) if a != TokenAttr.NORMAL]
    assert ours == fx["attrs_not_normal"]


@pytest.mark.parametrize("special", [False, True])
def test_every_piece(model, special):
    "token_to_piece of all ids, hashed the way the fixture script hashes llama.cpp's."
    _, tok, fx = model
    h = hashlib.sha256()
    for tid in range(tok.n_vocab):
        p = tok.token_to_piece(tid, special)
        h.update(len(p).to_bytes(4, "little")); h.update(p)
    if h.hexdigest() != fx["pieces_special_sha256" if special else "pieces_sha256"]:
        bad = [t for t, d in fx["pieces_sample"].items() if tok.token_to_piece(int(t), True) != fixture_bytes(d)]
        pytest.fail(f"pieces differ from llama.cpp's; sampled ids that differ: {bad[:20]}")


def test_encode_matches_llama_cpp(model):
    _, tok, fx = model
    failures = []
    for c in fx["cases"]:
        ids = tok.encode(c["text"], add_special=c["add_special"], parse_special=c["parse_special"])
        if ids != c["ids"]: failures.append((c["text"][:60], c["add_special"], c["parse_special"], ids[:12], c["ids"][:12]))
    assert not failures, f"{len(failures)} of {len(fx['cases'])} differ, e.g. {failures[:3]}"


def test_decode_matches_llama_cpp(model):
    _, tok, fx = model
    for c in fx["cases"]:
        assert tok.decode_bytes(c["ids"]) == fixture_bytes(c["detok"]), c["text"][:60]
        if "detok_special" in c:
            assert tok.decode_bytes(c["ids"], special=True) == fixture_bytes(c["detok_special"]), c["text"][:60]


def test_round_trip_where_llama_cpp_round_trips(model):
    _, tok, fx = model
    n = 0
    for c in fx["cases"]:
        if c["add_special"] or c["parse_special"]: continue
        if fixture_bytes(c["detok"]) == c["text"].encode():
            assert tok.decode(tok.encode(c["text"], add_special=False)) == c["text"]
            n += 1
    assert n > 60


def test_stream_decoder_equals_decode(model):
    _, tok, fx = model
    for c in fx["cases"]:
        sd = StreamDecoder(tok)
        pieces = [sd.feed(t) for t in c["ids"]] + [sd.flush()]
        assert "".join(pieces) == tok.decode(c["ids"]), c["text"][:60]


def test_stream_decoder_holds_split_characters(model):
    "Emoji and CJK characters that span several tokens come out whole, never as U+FFFD."
    _, tok, _ = model
    text = "🦙 我想在 👨\u200d👩\u200d👧 កាន់តែ ✅"
    ids = tok.encode(text, add_special=False)
    sd = StreamDecoder(tok)
    pieces = [sd.feed(t) for t in ids]
    assert "".join(pieces) + sd.flush() == text
    assert not any("\ufffd" in p for p in pieces)
    # some character of this text is split across tokens, so the decoder had to hold bytes back
    assert any(p == "" for p in pieces)


def test_stream_decoder_invalid_utf8(model):
    "A continuation byte on its own can never complete: it is emitted as U+FFFD, and the text goes on."
    _, tok, _ = model
    byte_tok = (lambda b: tok.token_id[f"<0x{b:02X}>"]) if tok.model == "llama" else \
               (lambda b: tok.token_id[__import__("llmbook.tokenizer").tokenizer.BYTE_TO_UNICODE[b]])
    a = tok.encode("a", add_special=False)
    sd = StreamDecoder(tok)
    out = sd.feed(byte_tok(0xE2)) + sd.feed(byte_tok(0x82)) + sd.feed(a[0]) + sd.feed(byte_tok(0x80)) + sd.flush()
    assert out == "\ufffda\ufffd"
    assert tok.decode([byte_tok(0xE2), byte_tok(0x82), a[0], byte_tok(0x80)]) == out


def test_spm_from_scratch_matches_llama_cpp():
    "Chapter 08's plain-Python SentencePiece BPE (`spm_merge`, `spm_ids`) gives llama.cpp's ids on Gemma 3's real vocabulary."
    path = gemma3_file()
    if path is None: pytest.fail("Gemma 3 is not installed")
    with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f)
    fx = load_fixture("tokenizer_gemma3.json")
    assert not tok.add_space_prefix
    for c in fx["cases"]:
        ids = [tok.bos] if c["add_special"] and tok.add_bos else []
        for frag in split_special(c["text"], tok._specials_all if c["parse_special"] else tok._specials_user):
            if isinstance(frag, int): ids.append(frag); continue
            ids += spm_ids(spm_merge(frag.replace(" ", "\u2581"), tok.token_id, tok.scores), tok.token_id, tok.byte_ids)
        assert ids == c["ids"], c["text"][:60]


def test_gemma3_pieces_are_the_one_at_a_time_bytes():
    "Gemma 3's 262,144 pieces, written by the tokenizers chapter's numpy writer, are byte for byte the one-at-a-time writer's."
    import numpy as np
    from llmbook.tokenizer_extras import _piece_entry, _piece_entries, _float32_scores
    path = gemma3_file()
    if path is None: pytest.fail("Gemma 3 is not installed")
    with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f, EXTRAS)
    kinds = np.array(f.metadata["tokenizer.ggml.token_type"]).clip(1, 6)
    expect = b"".join(_piece_entry(t, s, int(k)) for t, s, k in zip(tok.tokens, tok.scores, kinds))
    assert _piece_entries(tok.tokens, _float32_scores(tok.scores), kinds) == expect
    assert tok.encode("The capital of France is") == [2, 818, 5279, 529, 7001, 563]   # through the library


def test_gemma3_short_and_long_fragments_agree(monkeypatch):
    "Short SentencePiece fragments go to spm_merge, long ones to the extras' sentencepiece library: both give llama.cpp's ids."
    import llmbook.tokenizer as T
    path = gemma3_file()
    if path is None: pytest.fail("Gemma 3 is not installed")
    with GGUFFile(path) as f: tok = Tokenizer.from_gguf(f, EXTRAS)
    fx = load_fixture("tokenizer_gemma3.json")
    long = " ".join(c["text"] for c in fx["cases"]) * 3
    assert len(long) > T.SPM_PLAIN_CHARS
    got = {}
    for path_name, limit in (("library", -1), ("spm_merge", 10 ** 9)):
        monkeypatch.setattr(T, "SPM_PLAIN_CHARS", limit)
        for c in fx["cases"]:
            assert tok.encode(c["text"], c["add_special"], c["parse_special"]) == c["ids"], (path_name, c["text"][:60])
        got[path_name] = tok.encode(long, parse_special=True)
    assert got["library"] == got["spm_merge"]
    monkeypatch.setattr(T, "SPM_PLAIN_CHARS", -1)
    with GGUFFile(path) as f: part_one = Tokenizer.from_gguf(f)                 # no extras: spm_merge, whatever the length
    assert part_one.encode(long, parse_special=True) == got["library"] and part_one._long_spm is None


def test_encode_is_fast_enough(smollm2_path):
    "100 kB of English in well under a second (the bench compares with llama.cpp)."
    import time
    from pydoc_data.topics import topics
    text = "\n\n".join(topics[k] for k in sorted(topics))[:100_000]
    with GGUFFile(smollm2_path) as f: tok = Tokenizer.from_gguf(f)
    t0 = time.perf_counter(); ids = tok.encode(text, add_special=False); dt = time.perf_counter() - t0
    assert tok.decode(ids) == text
    assert dt < 1.5, f"{dt:.2f} s for 100 kB"


def test_bad_metadata_errors():
    good = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.tokens": ["a", "b", "ab"],
            "tokenizer.ggml.merges": ["a b"]}
    assert Tokenizer(good).encode("abab", add_special=False) == [2, 2]
    for bad, msg in [({}, "tokenizer.ggml.model"),
                     ({**good, "tokenizer.ggml.pre": "nope"}, "known: "),
                     ({**good, "tokenizer.ggml.pre": "qwen2"}, r"load\(path\), or pass llmbook.tokenizer_extras.EXTRAS"),
                     ({**good, "tokenizer.ggml.tokens": []}, "empty"),
                     ({**good, "tokenizer.ggml.tokens": ["a", 3]}, "not str"),
                     ({**good, "tokenizer.ggml.merges": None}, "merges"),
                     ({**good, "tokenizer.ggml.model": "llama", "tokenizer.ggml.scores": [0.0]}, "1 items for 3")]:
        with pytest.raises(TokenizerError, match=msg): Tokenizer(bad)
    assert Tokenizer({**good, "tokenizer.ggml.pre": "qwen2"}, EXTRAS).pre.name == "qwen2"   # the extras know it
    with pytest.raises(TokenizerError, match="known: .*qwen2"): Tokenizer({**good, "tokenizer.ggml.pre": "nope"}, EXTRAS)
    tok = Tokenizer(good)
    with pytest.raises(IndexError): tok.token_to_piece(99)
    with pytest.raises(TypeError): tok.encode(b"bytes")


@pytest.fixture(scope="module")
def smollm2_metadata():
    path = smollm2_file()
    if path is None: pytest.fail("SmolLM2 is not installed")
    with GGUFFile(path) as f: return dict(f.metadata)


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe", "qwen2", "starcoder"])
def test_other_pre_tokenizers(smollm2_metadata, pre):
    "SmolLM2's vocabulary under other pre-tokenizers, against llama.cpp loading the same vocabulary."
    fx = load_fixture("tokenizer_bpe_variants.json")["variants"][pre]
    tok = Tokenizer({**smollm2_metadata, "tokenizer.ggml.pre": pre}, EXTRAS)
    assert tok.add_bos == fx["add_bos"]
    failures = [(c["text"][:50], tok.encode(c["text"], add_special=False)[:10], c["ids"][:10])
                for c in fx["cases"] if tok.encode(c["text"], add_special=False) != c["ids"]]
    assert not failures, f"{len(failures)} of {len(fx['cases'])} differ, e.g. {failures[:3]}"
    for c in fx["cases"]:      # llama.cpp's detokenizer, with clean_spaces for gpt-2, llama-bpe and starcoder
        assert tok.decode_bytes(c["ids"]) == fixture_bytes(c["detok"]), c["text"][:60]


def test_long_english_text(model):
    "100 kB of English (Python's own docs) gives exactly llama.cpp's ids (compared by hash)."
    import json
    from pydoc_data.topics import topics
    _, tok, fx = model
    rec = fx["long_text"]
    text = "\n\n".join(topics[k] for k in sorted(topics))[:100_000]
    if hashlib.sha256(text.encode()).hexdigest() != rec["text_sha256"]:
        pytest.skip(f"this Python's pydoc_data differs from the fixture's (Python {rec['python']})")
    ids = tok.encode(text, add_special=False)
    assert len(ids) == rec["n_tokens"]
    assert hashlib.sha256(json.dumps(ids).encode()).hexdigest() == rec["ids_sha256"]


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe", "starcoder"])
def test_stream_decoder_with_clean_spaces(smollm2_metadata, pre):
    "With llama.cpp's space clean-up on, the streamed pieces still join to exactly llama.cpp's detokenized text."
    fx = load_fixture("tokenizer_bpe_variants.json")["variants"][pre]
    tok = Tokenizer({**smollm2_metadata, "tokenizer.ggml.pre": pre}, EXTRAS)
    assert tok.clean_spaces
    for c in fx["cases"]:
        sd = StreamDecoder(tok)
        streamed = "".join(sd.feed(t) for t in c["ids"]) + sd.flush()
        assert streamed == fixture_bytes(c["detok"]).decode("utf-8", "replace"), c["text"][:60]


def test_sentencepiece_space_prefix():
    "Gemma 3's vocabulary with add_space_prefix=True: a space before the text and after each special token, as llama.cpp."
    path = gemma3_file()
    if path is None: pytest.fail("Gemma 3 is not installed")
    with GGUFFile(path) as f: md = dict(f.metadata)
    tok = Tokenizer({**md, "tokenizer.ggml.add_space_prefix": True})
    fx = load_fixture("tokenizer_gemma3_space_prefix.json")
    failures = []
    for c in fx["cases"]:
        ids = tok.encode(c["text"], add_special=c["add_special"], parse_special=c["parse_special"])
        if ids != c["ids"]: failures.append((c["text"][:50], c["add_special"], c["parse_special"]))
        assert tok.decode_bytes(c["ids"]) == fixture_bytes(c["detok"]), c["text"][:60]
        sd = StreamDecoder(tok)
        assert "".join(sd.feed(t) for t in c["ids"]) + sd.flush() == tok.decode(c["ids"])
    assert not failures, f"{len(failures)} of {len(fx['cases'])} differ, e.g. {failures[:3]}"


def test_merge_whose_result_is_not_a_token():
    "A rule that makes a text missing from the vocabulary still merges (llama.cpp's way); a final symbol that is not a token falls back to its bytes."
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.tokens": ["a", "b", "c", "abc"],
          "tokenizer.ggml.merges": ["a b", "ab c", "b c"]}
    tok = Tokenizer(md)
    assert tok.encode("abc", add_special=False) == [3]            # "ab" is no token, but "ab c" makes "abc"
    assert tok.encode("ab", add_special=False) == [0, 1]          # "ab" stays a symbol: its bytes' tokens
    assert tok.encode("bc", add_special=False) == [1, 2]          # "bc" likewise
    # a repeated rule: the first rank counts; a rule without a space never matches
    tok = Tokenizer({**md, "tokenizer.ggml.merges": ["b c", "a b", "ab c", "b c", "abc"]})
    assert tok.encode("abc", add_special=False) == [0, 1, 2]      # "b c" first: "a" + "bc", no rule for "a bc"


def test_tokenizer_memory(model):
    "What the tokenizer itself allocates (the metadata lists are the GGUFFile's): was 16.7 MB / 24.7 MB before tables were slimmed."
    import tracemalloc
    name, _, _ = model
    with GGUFFile(MODELS[name]()) as f:
        md = f.metadata
        tracemalloc.start()
        try:
            tok = Tokenizer(md)
            tok.encode("Hello, world! 12345", add_special=False)
            kept = tracemalloc.get_traced_memory()[0] / 1e6
        finally: tracemalloc.stop()
    # gemma3: a short text goes to spm_merge, which needs text -> id (16 MB of Python objects); the sentencepiece
    # library it spares holds ~49 MB (resident, measured), in C++ where tracemalloc does not look
    assert kept < {"smollm2": 6, "gemma3": 20}[name], f"{name}: the tokenizer keeps {kept:.1f} MB"
    if name == "gemma3": assert tok._long_spm is None             # the library is built for long fragments only
    else: assert tok._token_id is None                            # text -> id is built only when asked for
    assert tok.token_id[tok.tokens[tok.eos]] == tok.eos
