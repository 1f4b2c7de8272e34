"""Make tests/fixtures/tokenizer_<name>.json from llama.cpp's own tokenizer (llama-cpp-python).

Run with the Python that has `llama_cpp` (a dev-only reference, never imported by llmbook):

    $REFPY tools/make_tokenizer_fixtures.py --smollm2 SmolLM2.gguf --gemma3 gemma-3-270m.gguf

(it needs `gguf` (gguf-py) too, for the tensor-less variant files of tokenizer_bpe_variants.json).

For every test string it records llama.cpp's token ids (`llama_tokenize`) for the add_special /
parse_special combinations, and `llama_detokenize` of those ids. For the whole vocabulary it records
the special ids, the end-of-generation set, the token attributes that are not NORMAL, and a sha256 of
every `llama_token_to_piece` so a test can check all 262k pieces without storing them.
"""
import argparse, ctypes, hashlib, json, sys
from pathlib import Path

import llama_cpp

# The strings of llama.cpp's convert_hf_to_gguf_update.py tokenizer tests (whitespace runs, emoji, CJK,
# Khmer, digit runs, contractions and the long check text), then our own.
CHK_TXT = ('\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 '
           '3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ '
           '------======= нещо на Български \'\'\'\'\'\'```````""""......!!!!!!?????? I\'ve been \'told he\'s there, '
           '\'RE you sure? \'M not sure I\'ll make it, \'D you like some tea? We\'Ve a\'lL')
LLAMA_CPP_TESTS = [
    "ied 4 ½ months", "Äpfel", "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n",
    "Hello world", " Hello world", "Hello World", " Hello World", " Hello World!", "Hello, world!",
    " Hello, world!", " this is 🦙.cpp", "w048 7tuijk dsdfhu", "нещо на Български", "កាន់តែពិសេសអាចខលចេញ",
    "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "Hello", " Hello", "  Hello", "   Hello", "    Hello", "    Hello\n    Hello", " (", "\n =", "' era",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "!!!!!!", "3", "33", "333", "3333", "33333",
    "333333", "3333333", "33333333", "333333333", "Cửa Việt", " discards", CHK_TXT,
]
OUR_TESTS = [
    # code
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\t// dot product\r\n",
    "x = {'a': [1, 2.5e-3, None], \"b\": (True,)}  # comment\n\n\n\tindented\ttabs",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%ann%';",
    "<div class=\"box\">&nbsp;&lt;tag&gt;</div>\n<br/>",
    # URLs, paths, e-mail, numbers
    "https://example.com/path/to/page?query=1&lang=en#frag and http://localhost:8080/",
    "C:\\Users\\me\\file.txt /usr/local/bin/python3.11 ~/.config",
    "mail someone@example.org, call +1 (555) 010-9999, pay $1,234.56 or €99,99",
    "1234567890 3.14159 1e10 0x1F 007 ١٢٣ ½ ² Ⅻ",
    # right-to-left scripts, combining characters, other scripts
    "مرحبا بالعالم! كيف حالك؟",
    "שלום עולם, מה שלומך?",
    "e\u0301 a\u0308 n\u0303 Zalgo: Z\u0351\u036b\u0343a\u0350\u0357l\u0344g\u0310o\u0352",
    "नमस्ते दुनिया। ভাষা தமிழ் ไทย ภาษา 한국어 日本語のテキスト",
    "Ελληνικά Русский Українська Ωμέγα",
    # control characters and unusual whitespace
    "a\x00b\x01c\x07d\x1be\x7ff",
    "line1\rline2\r\nline3\u2028line4\u2029line5\x85line6",
    "non\u00a0breaking\u2003em\u3000ideographic\u200bzero\ufeffbom",
    " \t \n \x0b \x0c \r ",
    # emoji with modifiers and joiners, flags
    "👍🏽 👨\u200d👩\u200d👧\u200d👦 🏳\ufe0f\u200d🌈 🇫🇷🇯🇵 ❤️\u200d🔥",
    # very long words and runs
    "a" * 300,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 8,
    "!" * 100 + "?" * 50,
    " " * 70 + "x" + "\n" * 40 + "y" + "\t" * 33,
    "9" * 77,
    # contractions and quotes
    "I'm sure you're right, they've said it's 'fine' but we'd rather not. DON'T SHOUT. I'LL GO",
    "« guillemets » „Anführungszeichen“ “smart quotes” ‘single’",
    # text that looks like special tokens
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos><pad><unk><mask><unused0>[multimodal]<|endoftext|>",
    "text<|im_end|>more<|endoftext|>",
    "<<|im_start|>> <start_of_turn><start_of_turn> <|im_end|<|im_end|>",
]
# Chat-template-like strings: recorded with every add_special / parse_special combination.
CHAT_TESTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>user\nWrite a haiku.<end_of_turn>\n<start_of_turn>model\nLeaves fall<end_of_turn>",
    "<|endoftext|>plain text after a special token<|im_end|>",
    "Hello <eos> world <|im_end|> ok",
]

def random_strings(n=300, seed=1234) -> list:
    "Seeded random mixtures of everything above: scripts, spaces, digits, emoji parts, special-token texts."
    import random
    rng = random.Random(seed)
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + list(" \t\n\r .,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`")
            + list("éèüößñçÅØæœ") + list("我想在工作天世界日本語") + list("нещоБългарски") + list("مرحباשלום") + list("កាន់តែពិសេស")
            + ["\u0301", "\u0308", "\u200d", "\ufe0f", "\u00a0", "\u3000", "\u2028", "\x00", "\x1b", "\x7f", "\x85", "\u2581"]
            + ["🦙", "🚀", "😁", "👍🏽", "🇫🇷", "✅", "½", "²", "Ⅻ", "٣"]
            + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<eos>", "<bos>",
               "<unused7>", "[multimodal]", "</s>", "\n\n\n", "    ", "\t\t", "'s", "'LL", "333", "http://", "..."])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def tokenize(vocab, text: str, add_special: bool, parse_special: bool) -> list[int]:
    data = text.encode("utf-8")
    n_max = len(data) + 16
    buf = (llama_cpp.llama_token * n_max)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, n_max, add_special, parse_special)
    if n < 0: raise RuntimeError(f"llama_tokenize needs {-n} tokens for {text!r}")
    return list(buf[:n])


def detokenize(vocab, ids: list[int], special: bool) -> bytes:
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 64 * len(ids)
    out = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), out, size, False, special)
    if n < 0: raise RuntimeError("detokenize buffer too small")
    return out.raw[:n]


def token_to_piece(vocab, tid: int, special: bool) -> bytes:
    size = 256
    out = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_token_to_piece(vocab, tid, out, size, 0, special)
    if n < 0: raise RuntimeError(f"piece of {tid} is longer than {size}")
    return out.raw[:n]


def pieces_sha256(vocab, n_vocab: int, special: bool) -> str:
    "sha256 over every piece, each prefixed by its length, so any single difference shows."
    h = hashlib.sha256()
    for tid in range(n_vocab):
        p = token_to_piece(vocab, tid, special)
        h.update(len(p).to_bytes(4, "little")); h.update(p)
    return h.hexdigest()


def as_text(b: bytes):
    "Valid UTF-8 is stored as text; anything else as hex, so the JSON stays exact."
    try: return {"text": b.decode("utf-8")}
    except UnicodeDecodeError: return {"hex": b.hex()}


def make_fixture(model_path: str) -> dict:
    llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    cases = []
    for text in LLAMA_CPP_TESTS + OUR_TESTS:
        ids = tokenize(vocab, text, False, False)
        cases.append({"text": text, "add_special": False, "parse_special": False, "ids": ids,
                      "detok": as_text(detokenize(vocab, ids, False))})
    for text in random_strings():
        for parse_special in (False, True):
            ids = tokenize(vocab, text, True, parse_special)
            cases.append({"text": text, "add_special": True, "parse_special": parse_special, "ids": ids,
                          "detok": as_text(detokenize(vocab, ids, False)), "random": True})
    for text in CHAT_TESTS:
        for add_special in (False, True):
            for parse_special in (False, True):
                ids = tokenize(vocab, text, add_special, parse_special)
                cases.append({"text": text, "add_special": add_special, "parse_special": parse_special, "ids": ids,
                              "detok": as_text(detokenize(vocab, ids, False)),
                              "detok_special": as_text(detokenize(vocab, ids, True))})
    attrs = [llama_cpp.llama_vocab_get_attr(vocab, t) for t in range(n_vocab)]
    NORMAL = 4
    step = max(1, n_vocab // 300)
    sample = sorted(set(range(0, n_vocab, step)) | {t for t in range(n_vocab) if attrs[t] != NORMAL and t < 600})
    return {
        "model": Path(model_path).name,
        "llama_cpp_python": llama_cpp.__version__,
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab), "eos": llama_cpp.llama_vocab_eos(vocab),
        "eot": llama_cpp.llama_vocab_eot(vocab),
        "nl": llama_cpp.llama_vocab_nl(vocab), "pad": llama_cpp.llama_vocab_pad(vocab),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog_ids": [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)],
        "attrs_not_normal": [[t, a] for t, a in enumerate(attrs) if a != NORMAL],
        "pieces_sha256": pieces_sha256(vocab, n_vocab, False),
        "pieces_special_sha256": pieces_sha256(vocab, n_vocab, True),
        "pieces_sample": {str(t): as_text(token_to_piece(vocab, t, True)) for t in sample},
        "cases": cases,
        "long_text": long_text_record(vocab),
    }


def long_english_text(n=100_000) -> str:
    "100 kB of English every Python has: its own documentation (the same text bench/tokenizer.py uses)."
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))[:n]


def long_text_record(vocab) -> dict:
    text = long_english_text()
    ids = tokenize(vocab, text, False, False)
    return {"source": "pydoc_data.topics, first 100000 chars", "python": sys.version.split()[0],
            "text_sha256": hashlib.sha256(text.encode()).hexdigest(), "n_tokens": len(ids),
            "ids_sha256": hashlib.sha256(json.dumps(ids).encode()).hexdigest()}


# Pre-tokenizers we have no real model for: SmolLM2's vocabulary and merges under another `tokenizer.ggml.pre`,
# written to a tensor-less GGUF that llama.cpp loads with vocab_only. Same BPE, different word splitting
# and (gpt-2, llama-bpe, starcoder) the clean_spaces detokenizer.
VARIANT_PRES = ["gpt-2", "llama-bpe", "qwen2", "starcoder"]


def write_variant_gguf(src: str, changes: dict, out: Path):
    "A copy of `src`'s metadata (no tensors) with the values in `changes` replaced."
    import gguf
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(out), arch=r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture": continue
        val = changes[key] if key in changes else field.contents()
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, val, field.types[0], sub)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


def make_variant_fixture(smollm2_path: str) -> dict:
    import tempfile
    out = {"source": Path(smollm2_path).name, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in VARIANT_PRES:
            path = Path(tmp) / f"vocab-{pre}.gguf"
            write_variant_gguf(smollm2_path, {"tokenizer.ggml.pre": pre}, path)
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
            vocab = llama_cpp.llama_model_get_vocab(llm.model)
            cases = []
            for text in LLAMA_CPP_TESTS + OUR_TESTS:
                ids = tokenize(vocab, text, False, False)
                cases.append({"text": text, "ids": ids, "detok": as_text(detokenize(vocab, ids, False))})
            out["variants"][pre] = {"add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)), "cases": cases}
            del llm
    return out


def make_space_prefix_fixture(gemma3_path: str) -> dict:
    "Gemma 3's SentencePiece vocabulary with add_space_prefix=True: the space llama.cpp puts before text fragments."
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vocab-gemma3-space-prefix.gguf"
        write_variant_gguf(gemma3_path, {"tokenizer.ggml.add_space_prefix": True}, path)
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        cases = []
        for text in LLAMA_CPP_TESTS + OUR_TESTS + CHAT_TESTS:
            for add_special in (False, True):
                for parse_special in (False, True):
                    ids = tokenize(vocab, text, add_special, parse_special)
                    cases.append({"text": text, "add_special": add_special, "parse_special": parse_special, "ids": ids,
                                  "detok": as_text(detokenize(vocab, ids, False))})
        del llm
    return {"source": Path(gemma3_path).name, "add_space_prefix": True, "cases": cases}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--gemma3", help="path of gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
    args = ap.parse_args(argv)
    if not (args.smollm2 or args.gemma3): ap.error("give --smollm2 and/or --gemma3")
    for name, path in (("smollm2", args.smollm2), ("gemma3", args.gemma3)):
        if not path: continue
        out = Path(args.out) / f"tokenizer_{name}.json"
        out.write_text(json.dumps(make_fixture(path), ensure_ascii=False, indent=None, separators=(",", ":")) + "\n")
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB)")
    if args.gemma3:
        out = Path(args.out) / "tokenizer_gemma3_space_prefix.json"
        out.write_text(json.dumps(make_space_prefix_fixture(args.gemma3), ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB)")
    if args.smollm2:
        out = Path(args.out) / "tokenizer_bpe_variants.json"
        out.write_text(json.dumps(make_variant_fixture(args.smollm2), ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB)")


if __name__ == "__main__":
    sys.exit(main())
