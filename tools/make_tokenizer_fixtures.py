"""Make tests/fixtures/tokenizer_<name>.json from llama.cpp's own tokenizer (llama-cpp-python).

Run with the Python that has `llama_cpp` (a dev-only reference, never imported by llmbook):

    $REFPY tools/make_tokenizer_fixtures.py --smollm2 SmolLM2.gguf --gemma3 gemma-3-270m.gguf \
        [--llama-cpp-src DIR]

(it needs `gguf` (gguf-py) too, for the tensor-less variant files of tokenizer_bpe_variants.json).

With --smollm2 it also writes tokenizer_pre_variants.json (issue 15): SmolLM2's vocabulary and merges under every
`tokenizer.ggml.pre` name llmbook implements (PRE_NAMES), each written to a tensor-less GGUF by llmbook's own
GGUFWriter (in a second Python that has llmbook: --llmbook-python, default $LLMBOOK_PY or .venv/bin/python), loaded
by llama.cpp with vocab_only, and the hard strings below tokenized; plus the SentencePiece chat vocabularies of
tools/family_models.CHAT_VOCABS (Phi-3's name-keyed RSTRIP rule among them).

With --llama-cpp-src DIR (llama.cpp's source tree, e.g. the llama-cpp-python sdist's vendor/llama.cpp) it writes
tokenizer_llama_cpp_vocabs.json: llama.cpp's ids for its own test strings (models/ggml-vocab-*.gguf.inp) on each
of its test vocabularies, which tests/test_tokenizer_families.py compares when LLAMA_CPP_SRC points at such a tree.

For every test string it records llama.cpp's token ids (`llama_tokenize`) for the add_special /
parse_special combinations, and `llama_detokenize` of those ids. For the whole vocabulary it records
the special ids, the end-of-generation set, the token attributes that are not NORMAL, and a sha256 of
every `llama_token_to_piece` so a test can check all 262k pieces without storing them.
"""
import argparse, ctypes, hashlib, json, os, subprocess, sys
from pathlib import Path

try: import llama_cpp
except ImportError: llama_cpp = None      # the --write-* modes run in the llmbook Python, which has no llama_cpp

ROOT = Path(__file__).resolve().parents[1]

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


# ---------------------------------------------------------------- issue 15: every pre-tokenizer name, families
# Every name llama.cpp's src/llama-vocab.cpp maps to a regex llmbook implements (tests check this list against
# llmbook.tokenizer.PRE_TOKENIZERS), with the flags llama.cpp gives each name.
PRE_NAMES = ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
             "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4",
             "trillion", "granite-docling",
             "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2", "smollm", "command-r",
             "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
             "dbrx", "smaug-bpe",
             "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2", "megrez", "stablelm2",
             "qwen35", "tekken", "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"]
# Strings for the case-splitting patterns (tekken, gpt-4o) and marks (qwen35), on top of the lists above
CASE_TESTS = [
    "HTMLParser camelCase snake_case x86_64 IPv6Address getHTTPResponseCode(URLs)",
    "ÉCOLE école ÀÉÎ Straße ǅungla ΣΊΣΥΦΟΣ Ωmega ĳssel",
    "I'M HE'S they'RE we'Ve you'D it's 'TIS DON'T",
    "e\u0301 a\u0308 n\u0303 ज़िंदगी क़िताब ไม่ใช่ 한국어",
    "path/to/file\r\n// comment /* block */\n\n\n\t\tx = a/b",
    "１２３ ４５６７ ①②③ 1,234,567.89 3rd 2nd 10th",
    "   leading\n\n   spaces   \n\t trailing   ",
]
HARD_TESTS = LLAMA_CPP_TESTS + OUR_TESTS + CASE_TESTS


def llmbook_run(llmbook_python: str, *args):
    "Run this script in the Python that has llmbook (to write a GGUF with llmbook's GGUFWriter)."
    r = subprocess.run([llmbook_python, __file__, *map(str, args)], capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"{args[0]} failed:\n{r.stderr[-3000:]}")


def write_variant_with_llmbook(src: str, changes: dict, out: Path):
    "(llmbook Python) `src`'s metadata, no tensors, `changes` applied (None deletes a key), written by GGUFWriter."
    sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))
    from llmbook.gguf import GGUFFile
    from family_models import write_vocab
    with GGUFFile(src) as f: md, types = dict(f.metadata), dict(f.metadata_types)
    for k, v in changes.items():
        if v is None: md.pop(k, None)
        else: md[k] = v
    write_vocab(out, md, {k: t for k, t in types.items() if k in md and k not in changes})


def write_chat_vocab_with_llmbook(family: str, out: Path):
    sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))
    from family_models import write_vocab, chat_vocab_metadata
    write_vocab(out, chat_vocab_metadata(family))


def load_vocab(path):
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return llm, llama_cpp.llama_model_get_vocab(llm.model)


def make_pre_variants_fixture(smollm2_path: str, llmbook_python: str) -> dict:
    import tempfile
    out = {"about": "SmolLM2's vocabulary and merges under each tokenizer.ggml.pre name (tokenizer.ggml.add_bos_token "
                    "removed, so each name's own BOS default shows), written by llmbook's GGUFWriter and tokenized by "
                    "llama.cpp (add_special=False, parse_special=False); `bos_ids`: strings[0] with add_special=True. "
                    "A variant equal to an earlier one says `same_as`. Made by tools/make_tokenizer_fixtures.py.",
           "source": Path(smollm2_path).name, "llama_cpp_python": llama_cpp.__version__,
           "strings": HARD_TESTS, "variants": {}, "spm_vocabs": {}}
    seen = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_NAMES:
            path = Path(tmp) / f"vocab-{pre}.gguf"
            llmbook_run(llmbook_python, "--write-variant", smollm2_path, path,
                        json.dumps({"tokenizer.ggml.pre": pre, "tokenizer.ggml.add_bos_token": None}))
            llm, vocab = load_vocab(path)
            ids = [tokenize(vocab, t, False, False) for t in HARD_TESTS]
            rec = {"add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
                   "bos_ids": tokenize(vocab, HARD_TESTS[0], True, False), "ids": ids,
                   "detok": [as_text(detokenize(vocab, i, False)) for i in ids]}
            del llm
            key = json.dumps(rec, sort_keys=True)
            out["variants"][pre] = {"same_as": seen[key]} if key in seen else rec
            seen.setdefault(key, pre)
        for family in ("phi3", "llama3", "mistral"):
            path = Path(tmp) / f"chat-{family}.gguf"
            llmbook_run(llmbook_python, "--write-chat-vocab", family, path)
            llm, vocab = load_vocab(path)
            n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
            cases = []
            for text in SPM_CHAT_TESTS + LLAMA_CPP_TESTS[:25]:
                for add_special in (False, True):
                    for parse_special in (False, True):
                        cases.append({"text": text, "add_special": add_special, "parse_special": parse_special,
                                      "ids": tokenize(vocab, text, add_special, parse_special)})
            out["spm_vocabs"][family] = {"attrs": [llama_cpp.llama_vocab_get_attr(vocab, t) for t in range(n_vocab)],
                                         "cases": cases}
            del llm
    return out


# Chat-like text for the SentencePiece chat vocabularies: whitespace on both sides of each special token
SPM_CHAT_TESTS = [
    "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
    "<|system|>  \n\t You are brief.<|end|>\n\n<|user|> Hi <|end|> \n<|assistant|>",
    "<s><|user|>\n\nx</s>  y<|endoftext|>\n z<unk>\n w",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<s>[INST] Hello [/INST] Hi</s>[INST] again [/INST]",
    "text <|end|>",
]


def make_llama_cpp_vocabs_fixture(src: Path) -> dict:
    "llama.cpp's ids for its own test strings on its own test vocabularies (models/ggml-vocab-*.gguf + .inp)."
    out = {"about": "llama.cpp's llama_tokenize(add_special=False, parse_special=False) of every string of "
                    "models/ggml-vocab-NAME.gguf.inp, on that vocabulary; `matches_out`: equal to the .out file "
                    "(made from Hugging Face's tokenizers). `chat`: SPM_CHAT_TESTS with parse_special. Made by "
                    "tools/make_tokenizer_fixtures.py --llama-cpp-src.", "llama_cpp_python": llama_cpp.__version__,
           "vocabs": {}}
    for path in sorted((src / "models").glob("ggml-vocab-*.gguf")):
        inp = path.with_name(path.name + ".inp")
        if not inp.exists(): continue
        texts = read_inp(inp)
        want = [[int(x) for x in line.split()] for line in path.with_name(path.name + ".out").read_text().split("\n")[:len(texts)]]
        try: llm, vocab = load_vocab(path)
        except Exception as e:
            out["vocabs"][path.name] = {"error": str(e)}; continue
        ids = [tokenize(vocab, t, False, False) for t in texts]
        out["vocabs"][path.name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "n_strings": len(texts),
                                    "ids": ids, "matches_out": [a == b for a, b in zip(ids, want)],
                                    "chat": [tokenize(vocab, t, True, True) for t in SPM_CHAT_TESTS]}
        del llm
    return out


def read_inp(path: Path) -> list:
    "The strings of a llama.cpp .inp file, split as tests/test-tokenizer-0.cpp splits them."
    raw, sep, out, pos = path.read_bytes().decode("utf-8"), "\n__ggml_vocab_test__\n", [], 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0: out.append(raw[pos:]); break
        out.append(raw[pos:nxt]); pos = nxt + len(sep)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--write-variant": return write_variant_with_llmbook(argv[1], json.loads(argv[3]), Path(argv[2]))
    if argv and argv[0] == "--write-chat-vocab": return write_chat_vocab_with_llmbook(argv[1], Path(argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--gemma3", help="path of gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
    ap.add_argument("--llama-cpp-src", type=Path, help="llama.cpp's source tree (its models/ggml-vocab-*.gguf)")
    ap.add_argument("--only-new", action="store_true", help="only the issue 15 fixtures (pre variants, llama.cpp vocabs)")
    ap.add_argument("--llmbook-python", default=os.environ.get("LLMBOOK_PY", str(ROOT / ".venv" / "bin" / "python")))
    args = ap.parse_args(argv)
    if not (args.smollm2 or args.gemma3 or args.llama_cpp_src): ap.error("give --smollm2, --gemma3 and/or --llama-cpp-src")
    if args.llama_cpp_src:
        out = Path(args.out) / "tokenizer_llama_cpp_vocabs.json"
        out.write_text(json.dumps(make_llama_cpp_vocabs_fixture(args.llama_cpp_src), ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB)")
    if args.smollm2:
        out = Path(args.out) / "tokenizer_pre_variants.json"
        out.write_text(json.dumps(make_pre_variants_fixture(args.smollm2, args.llmbook_python), ensure_ascii=False,
                                  separators=(",", ":")) + "\n")
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB)")
    if args.only_new: return
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
