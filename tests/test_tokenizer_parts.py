"""The tokenizer's parts on toy vocabularies (no model file needed): the checks chapter 08 used to make inline,
kept here so the chapter can show the idea and leave the edge cases to the tests."""
import random, re

import numpy as np
import pytest

from llmbook.tokenizer import (BYTE_TO_UNICODE, _NOT_A_TOKEN, _UNICODE_TO_BYTE, StreamDecoder, Tokenizer, TokenizerError,
                               _bpe_merge, _bytes_to_symbols, merge_table, pre_tokenize, split_special,
                               spm_merge, spm_ids, unicode_classes, _clean_spaces, _last_safe_cut)
from llmbook.tokenizer_extras import (PRE_TOKENIZERS, sentencepiece_model, _sentencepiece_processor, _piece_entry,
                                      _piece_entries, _float32_scores)

TOY_TEXT = ("The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs over the hills "
            "and the other foxes follow the quick one. Then they rest, and the lazy dog dreams of foxes.")


def bpe_simple(symbols, ranks):
    "BPE by rescanning (chapter 08): merge the best-ranked adjacent pair, leftmost on ties, until none is left."
    symbols = list(symbols)
    while len(symbols) > 1:
        pair_ranks = [ranks.get(f"{a} {b}", 1 << 62) for a, b in zip(symbols, symbols[1:])]
        best = min(range(len(pair_ranks)), key=pair_ranks.__getitem__)
        if pair_ranks[best] == 1 << 62: break
        symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
    return symbols


def train_bpe(text, n_merges):
    words = [list(_bytes_to_symbols(w.encode())) for w in re.findall(r" ?\w+| ?[^\w\s]+|\s+", text)]
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for pair in zip(w, w[1:]): counts[pair] = counts.get(pair, 0) + 1
        if not counts: break
        a, b = max(counts, key=lambda p: (counts[p], p))
        merges.append(f"{a} {b}")
        words = [bpe_simple(w, {f"{a} {b}": 0}) for w in words]
    return merges


TOY_MERGES = train_bpe(TOY_TEXT, 60)


def toy_metadata(pre="gpt-2"):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = specials + BYTE_TO_UNICODE + [rule.replace(" ", "") for rule in TOY_MERGES]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [3, 3, 3] + [1] * (len(tokens) - 3), "tokenizer.ggml.merges": TOY_MERGES,
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.add_bos_token": False}


def toy_spm_vocab():
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types, scores, seen = [2, 3, 3] + [6] * 256, [0.0] * 259, set(pieces)
    def unescape(s): return bytes(_UNICODE_TO_BYTE[c] for c in s).decode("utf-8", "replace").replace(" ", "▁")
    for rank, (a, b) in enumerate(rule.split(" ") for rule in TOY_MERGES):
        for p in (unescape(a), unescape(b), unescape(a + b)):
            if p not in seen and "\ufffd" not in p:
                seen.add(p); pieces.append(p); types.append(1); scores.append(-float(rank + len(p)))
    return pieces, scores, types


def test_byte_alphabet():
    assert _bytes_to_symbols(b" ") == "Ġ" and _bytes_to_symbols(b"\n") == "Ċ"
    assert bytes(_UNICODE_TO_BYTE[c] for c in _bytes_to_symbols(bytes(range(256)))) == bytes(range(256))


def test_unicode_classes_kept_on_disk(tmp_path, monkeypatch):
    "The tokenizers chapter keeps the walk's classes in a file: read back; a bad file is walked again and rewritten."
    import json
    import llmbook.tokenizer as T, llmbook.tokenizer_extras as X
    walked = T.walk_unicode_classes()
    path = tmp_path / "cache" / "classes.json"
    X._write_classes(path, walked)
    assert X._read_classes(path) == walked and not list(path.parent.glob("*.tmp"))
    for bad in ("{", "[]", '{"L": "a"}', json.dumps({**walked, "L": 1})):
        path.write_text(bad); assert X._read_classes(path) is None
    monkeypatch.setattr(X, "_classes_file", lambda: path)
    assert X._unicode_classes_on_disk() == walked and X._read_classes(path) == walked   # the bad file was rewritten
    (tmp_path / "a_file").write_text("")                                               # a directory we cannot make
    monkeypatch.setattr(X, "_classes_file", lambda: tmp_path / "a_file" / "classes.json")
    assert X._unicode_classes_on_disk() == walked                                       # walked, nothing kept
    # a process makes its classes once, with the maker of the first vocabulary that needs them: EXTRAS' reads the file
    monkeypatch.setattr(X, "_classes_file", lambda: path)
    monkeypatch.setattr(T, "walk_unicode_classes", lambda: pytest.fail("walked although the file was there"))
    monkeypatch.setattr(T, "_CLASSES", {})
    T._compiled.cache_clear()
    try:
        tok = Tokenizer(toy_metadata(), X.EXTRAS)
        assert T.unicode_classes() == walked and tok.decode(tok.encode("Hi 12 ü!")) == "Hi 12 ü!"
    finally: T._compiled.cache_clear()


def test_unicode_classes():
    cls = unicode_classes()
    letter, number, space = (re.compile(f"[{cls[k]}]") for k in "LNS")
    assert letter.match("é") and letter.match("ж") and letter.match("我") and not letter.match("1")
    assert number.match("٣") and number.match("½") and not number.match("x")
    assert space.match("\u3000") and space.match("\x85") and not space.match("\x1c") and re.match(r"\s", "\x1c")


def test_pre_tokenizers():
    assert pre_tokenize("a  b", PRE_TOKENIZERS["gpt-2"]) == ["a", " ", " b"]
    assert pre_tokenize("12345", PRE_TOKENIZERS["llama-bpe"]) == ["123", "45"]
    assert pre_tokenize("x12", PRE_TOKENIZERS["smollm"]) == ["x", "1", "2"]
    sample = "Hello, y'all!   How's 2024 going?\n\n  12345 \U0001F680"
    for name in ("gpt-2", "smollm", "llama-bpe", "qwen2", "starcoder"):
        assert "".join(pre_tokenize(sample, PRE_TOKENIZERS[name])) == sample


def test_split_special():
    specials = sorted([("<|im_start|>", 1), ("<|im_end|>", 2), ("\n", 3)], key=lambda t: -len(t[0]))
    assert split_special("<|im_start|>user\nhi<|im_end|>\n", specials) == [1, "user", 3, "hi", 2, 3]
    assert split_special("a<|im_end|><|im_end|>b", [("<|im_end|>", 2)]) == ["a", 2, 2, "b"]
    assert split_special("no specials here", [("<|im_end|>", 2)]) == ["no specials here"]
    assert split_special("", [("<|im_end|>", 2)]) == []


def test_split_special_takes_whitespace_where_asked():
    "RSTRIP/LSTRIP ids take C's isspace() whitespace after/before each occurrence, one occurrence after the other."
    specials = [("<|user|>", 4), ("<|end|>", 5)]
    assert split_special("<|user|>\n  Hi<|end|>\n", specials, rstrip={4, 5}) == [4, "Hi", 5]
    assert split_special("<|user|>\n  Hi<|end|>\n", specials) == [4, "\n  Hi", 5, "\n"]
    assert split_special("Hi \t\n<|end|> x", specials, lstrip={5}) == ["Hi", 5, " x"]
    assert split_special(" \v<|end|>\f\r <|end|>\u3000", specials, lstrip={5}, rstrip={5}) == [5, 5, "\u3000"]
    assert split_special("<x> <x> <x>", [(" <x>", 7), ("<x>", 8)], rstrip={7}) == [8, 7, 8]   # skipped, then searched


def test_heap_merge_equals_rescanning():
    "Chapter 08's heap (`_bpe_merge`) gives the rescanning loop's pieces, and the ids of those pieces, on random words."
    token_id = {t: i for i, t in enumerate(BYTE_TO_UNICODE + [rule.replace(" ", "") for rule in TOY_MERGES])}
    table, ranks = merge_table(TOY_MERGES, token_id), {rule: i for i, rule in enumerate(TOY_MERGES)}
    assert {r: (v >> 32, v & _NOT_A_TOKEN) for r, v in list(table.items())[:3]} == {
        r: (i, token_id[r.replace(" ", "")]) for i, r in enumerate(TOY_MERGES[:3])}
    rng, alphabet = random.Random(0), list("the quick brown fox") + ["é", "\n", "1"]
    for _ in range(300):
        w = _bytes_to_symbols("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))).encode())
        texts, ids = _bpe_merge(list(w), [token_id[c] for c in w], table)
        assert texts == bpe_simple(list(w), ranks) and ids == [token_id[t] for t in texts], w
    w = _bytes_to_symbols(b" the lazy fox" * 150)                                   # one long word
    assert _bpe_merge(list(w), [token_id[c] for c in w], table)[0] == bpe_simple(w, ranks)


def spm_simple(text, token_id, scores):
    "SentencePiece by rescanning: merge the adjacent pair whose concatenation scores highest (leftmost on ties)."
    symbols = list(text)
    while True:
        pairs = [(-scores[token_id[a + b]], i) for i, (a, b) in enumerate(zip(symbols, symbols[1:])) if a + b in token_id]
        if not pairs: return symbols
        _, i = min(pairs)
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]


def test_spm_heap_equals_rescanning():
    tokens, scores, _ = toy_spm_vocab()
    token_id = {t: i for i, t in enumerate(tokens)}
    rng, alphabet = random.Random(0), list("the quick brown fox") + ["é", "\n", "1"]
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))).replace(" ", "▁")
        assert spm_merge(s, token_id, scores) == spm_simple(s, token_id, scores), s
    ties = {"a": 0, "b": 1, "ab": 2, "ba": 3}                                       # equal scores: leftmost first
    assert spm_merge("abab", ties, [0.0, 0.0, -1.0, -1.0]) == spm_simple("abab", ties, [0.0, 0.0, -1.0, -1.0]) == ["ab", "ab"]


def test_clean_spaces():
    assert _clean_spaces(b"Hello , world ! Isn 't it ? He 's ' fine ' .") == b"Hello, world! Isn 't it? He's'fine '."
    assert _clean_spaces(b" ' ' ") == b"'' "


def test_streamed_clean_up_equals_whole_clean_up():
    "Every way of cutting tricky byte strings into pieces cleans to the same bytes as the whole."
    def stream_clean(chunks):
        out, pending = b"", b""
        for ch in chunks:
            pending += ch
            cut = _last_safe_cut(pending)
            out, pending = out + _clean_spaces(pending[:cut]), pending[cut:]
        return out + _clean_spaces(pending)
    rng = random.Random(0)
    for t in [b"He 's ' fine ' . We 're  ' s x", b"a  ' 'm , ' ' ? 've 're ' re", b" ' ' ' ,, ! 's't"]:
        for _ in range(200):
            cuts = sorted(rng.sample(range(1, len(t)), rng.randint(0, min(8, len(t) - 1))))
            chunks = [t[i:j] for i, j in zip([0] + cuts, cuts + [len(t)])]
            assert stream_clean(chunks) == _clean_spaces(t), chunks


def test_toy_tokenizer_special_tokens():
    tok = Tokenizer(toy_metadata(pre="smollm"))
    chat = "<|im_start|>user\nThe lazy dog sleeps.<|im_end|>\n"
    ids = tok.encode(chat, parse_special=True)
    assert ids[0] == 1 and tok.decode(ids) == "user\nThe lazy dog sleeps.\n"        # control tokens left out
    assert tok.decode(ids, special=True) == chat
    plain = tok.encode(chat, parse_special=False)
    assert plain[0] != 1 and len(plain) > len(ids) and tok.decode(plain) == chat
    assert tok.eog_ids == {0, 2} and tok.is_eog(2) and not tok.is_eog(1) and tok.is_control(1)


def test_toy_clean_spaces_decode():
    gpt2_tok, smol_tok = Tokenizer(toy_metadata(pre="gpt-2")), Tokenizer(toy_metadata(pre="smollm"))
    odd = "Is it ? Yes , it 's fine ."
    assert gpt2_tok.decode(gpt2_tok.encode(odd)) == "Is it? Yes, it's fine." and smol_tok.decode(smol_tok.encode(odd)) == odd
    sd = StreamDecoder(gpt2_tok)
    assert "".join(sd.feed(t) for t in gpt2_tok.encode(odd)) + sd.flush() == "Is it? Yes, it's fine."


def test_toy_stream_decoder():
    tok = Tokenizer(toy_metadata(pre="smollm"))
    text = "fox \U0001F98A jumps"
    ids = tok.encode(text, add_special=False)
    sd = StreamDecoder(tok)
    pieces = [sd.feed(t) for t in ids] + [sd.flush()]
    assert "".join(pieces) == text and all("\ufffd" not in p for p in pieces)
    assert pieces[ids.index(tok.token_id[BYTE_TO_UNICODE[0xF0]])] == ""               # first byte: nothing yet
    bad = StreamDecoder(tok)
    assert bad.feed(tok.token_id[BYTE_TO_UNICODE[0x80]]) == "\ufffd" and bad.feed(tok.token_id["a"]) == "a"
    half = StreamDecoder(tok)
    assert half.feed(tok.token_id[BYTE_TO_UNICODE[0xE2]]) == "" and half.flush() == "\ufffd"


def test_sentencepiece_model_bytes_are_the_protobuf_model():
    "The pieces written in protobuf's wire format read back as the pieces, scores and types given."
    from sentencepiece import sentencepiece_model_pb2 as pb
    tokens, scores, types = toy_spm_vocab()
    model = pb.ModelProto.FromString(sentencepiece_model(tokens, scores, types, unk_id=0))
    assert model.trainer_spec.model_type == pb.TrainerSpec.BPE and model.trainer_spec.byte_fallback
    assert [(p.piece, p.score, p.type) for p in model.pieces] == [(t, s, 2 if i == 0 else k)
                                                                  for i, (t, s, k) in enumerate(zip(tokens, scores, types))]


def test_piece_entries_are_the_one_at_a_time_bytes():
    "The tokenizers chapter's numpy writer gives `_piece_entry`'s bytes: varints of 1-3 bytes, empty, non-ASCII, non-UTF-8 texts."
    rng = random.Random(1)
    texts = ["", "a" * 127, "b" * 128, "c" * 16383, "d" * 16384, "é" * 70, "▁the", "✅𝄞", "<0x0A>"] + [
        "".join(rng.choice("ab▁é✅𝄞\n") for _ in range(rng.randint(0, 40))) for _ in range(300)]
    scores = [rng.uniform(-1e6, 1e6) for _ in texts] + [0.0]          # Python floats: both round them to float32
    kinds = np.array([rng.randint(1, 6) for _ in texts])
    one_at_a_time = lambda: b"".join(_piece_entry(t, s, int(k)) for t, s, k in zip(texts, scores, kinds))
    assert _piece_entries(texts, _float32_scores(scores[:len(texts)]), kinds) == one_at_a_time()
    texts[3] = "x\udcff\udc80y"                                         # bytes that were not UTF-8: the slow path
    assert _piece_entries(texts, _float32_scores(scores[:len(texts)]), kinds) == one_at_a_time()
    assert _piece_entries([], np.zeros(0, np.float32), np.zeros(0, np.int64)) == b""


def test_scores_beyond_float32_are_refused():
    for bad in (1e39, -1e39, 10 ** 400):
        with pytest.raises(TokenizerError, match="token 2's score"):
            sentencepiece_model(["a", "b", "c"], [0.0, 1.0, bad], [1, 1, 1], unk_id=0)
    sentencepiece_model(["a", "b", "c"], [float("inf"), float("-inf"), -3.4e38], [1, 1, 1], unk_id=0)   # float32 has these


def test_plain_python_sentencepiece_equals_the_library():
    tokens, scores, types = toy_spm_vocab()
    token_id = {t: i for i, t in enumerate(tokens)}
    byte_ids = [token_id[f"<0x{b:02X}>"] for b in range(256)]
    sp = _sentencepiece_processor(tokens, scores, types, unk_id=0)
    rng, alphabet = random.Random(0), list("the quick brown fox") + ["é", "\n", "1"]
    for s in ["the lazy fox", " over the hills", "héllo wörld ✅"] + [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(300)]:
        assert spm_ids(spm_merge(s.replace(" ", "▁"), token_id, scores), token_id, byte_ids) == sp.encode(s), s


def test_toy_sentencepiece_space_prefix():
    tokens, scores, types = toy_spm_vocab()
    tok = Tokenizer({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
                     "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 1,
                     "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0})
    assert tok.add_bos and tok.add_space_prefix                                     # SentencePiece's defaults
    ids = tok.encode("the lazy fox</s>the dog", parse_special=True)
    assert [tok.tokens[i] for i in ids[:2]] == ["<s>", "▁the"] and tok.tokens[ids[ids.index(2) + 1]] == "▁the"
    assert tok.decode(tok.encode("the lazy fox", add_special=False)) == "the lazy fox"
    assert tok.decode(tok.encode("the lazy fox", add_special=True)) == " the lazy fox"   # after a BOS the space stays
    cont = StreamDecoder(tok, starts_text=False)                                    # a continuation keeps its space
    assert "".join(cont.feed(t) for t in tok.encode("fox", add_special=False)) + cont.flush() == " fox"


@pytest.mark.parametrize("change,msg", [({"tokenizer.ggml.model": "bert"}, "supported are"),
                                        ({"tokenizer.ggml.pre": "mystery"}, "known: "),
                                        ({"tokenizer.ggml.tokens": 5}, "not an array"),
                                        ({"tokenizer.ggml.token_type": [1]}, "1 items for")])
def test_toy_bad_metadata(change, msg):
    with pytest.raises(TokenizerError, match=msg): Tokenizer({**toy_metadata(), **change})
