"""Make tests/fixtures/chat_templates.json: how llama.cpp lays out the chat templates of the model families of
issue 15 (ChatML as SmolLM2 carries it, Qwen 2.5, Qwen 3, Phi-3 and Phi-3.5, Gemma 2, Llama 3.1, Mistral 7B
Instruct and Mistral Nemo) for several conversations, as text and as token ids.

    $REFPY tools/make_chat_fixtures.py --smollm2 SmolLM2.gguf --gemma3 gemma-3-270m.gguf --llama-cpp-src DIR

The templates are the ones those models' GGUF files carry (`tokenizer.chat_template`): SmolLM2's from its file,
Phi-3-mini's from llama.cpp's models/ggml-vocab-phi-3.gguf, the others from llama.cpp's models/templates/*.jinja
(copies of the models' tokenizer_config.json), Mistral 7B Instruct's from llama-cpp-python's
MISTRAL_INSTRUCT_CHAT_TEMPLATE. Each template's text is stored in the fixture, so the tests need no llama.cpp.

Which llama.cpp rendering, and why. llama.cpp has two:
- `llama_chat_apply_template` (src/llama-chat.cpp, the C API): it does not run the template; it guesses a known
  format from the template's text and writes that format with C++ code. Recorded as `builtin`, for information:
  for several templates it is not what the template says (it trims messages, merges Gemma's system message with
  "\n\n", knows no Qwen 3 thinking block...).
- the template itself, run as Jinja: llama.cpp's server (common/chat.cpp with its own Jinja engine) and
  llama-cpp-python's `Jinja2ChatFormatter` (jinja2, sandboxed, trim_blocks and lstrip_blocks, as transformers).
  This is what the model was trained with, and what llmbook's `render_chat` does: it is the reference (`text`),
  rendered here with llama-cpp-python's Jinja2ChatFormatter. One rule of common/chat.cpp is applied first, because
  llama-cpp-python lacks it: when a conversation starts with a system message and the template does not use one
  (Gemma 2's raises), the system content + "\n" is merged into the next message (workaround
  `system_message_not_supported`; a lone system message is dropped).
Token ids (`ids`) are the server's: llama.cpp tokenizes the text with add_special=True and parse_special=True,
after removing the BOS text when the template wrote it and the vocabulary adds a BOS itself
(common_chat_template_direct_apply). Vocabularies: SmolLM2's file for the ChatML and Qwen templates, Gemma 3's
for Gemma 2's, and for the others tools/family_models.CHAT_VOCABS written by llmbook's GGUFWriter (a second
Python with llmbook: --llmbook-python, default $LLMBOOK_PY or .venv/bin/python).
"""
import argparse, ctypes, json, os, subprocess, sys, tempfile
from pathlib import Path
import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter, MISTRAL_INSTRUCT_CHAT_TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

# name: (where the template comes from, the vocabulary that tokenizes it)
TEMPLATES = {
    "chatml-smollm2": ("gguf:smollm2", "smollm2"),
    "qwen2.5": ("templates/Qwen-Qwen2.5-7B-Instruct.jinja", "smollm2"),
    "qwen3": ("templates/Qwen-Qwen3-0.6B.jinja", "smollm2"),
    "phi3-mini": ("gguf:ggml-vocab-phi-3.gguf", "phi3"),
    "phi3.5": ("templates/microsoft-Phi-3.5-mini-instruct.jinja", "phi3"),
    "gemma2": ("templates/google-gemma-2-2b-it.jinja", "gemma3"),
    "llama3.1": ("templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"),
    "mistral-7b-instruct": ("llama-cpp-python:MISTRAL_INSTRUCT_CHAT_TEMPLATE", "mistral"),
    "mistral-nemo": ("templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"),
}
S = {"role": "system", "content": "You are a terse assistant. Answer in one line."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "Paris."}
U2 = {"role": "user", "content": "  And of Italy? \n"}
CONVERSATIONS = {
    "user": [U1],
    "system_user": [S, U1],
    "multi_turn": [U1, A1, U2],
    "system_multi_turn": [S, U1, A1, U2],
    "system_only": [S],
    "ends_with_assistant": [U1, A1],
}


def template_text(src: str, paths: dict) -> str:
    kind, _, what = src.partition(":")
    if src.startswith("templates/"): return (paths["llama_cpp_src"] / "models" / src).read_text()
    if kind == "llama-cpp-python": return MISTRAL_INSTRUCT_CHAT_TEMPLATE
    gguf_path = paths["smollm2"] if what == "smollm2" else paths["llama_cpp_src"] / "models" / what
    llm = llama_cpp.Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    t = llm.metadata["tokenizer.chat_template"]
    del llm
    return t


def render_jinja(template, msgs, add_gen, bos, eos):
    "llama-cpp-python's Jinja2ChatFormatter, after common/chat.cpp's system-message rule."
    def fmt(m): return Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos, add_generation_prompt=add_gen)(messages=m).prompt
    msgs = [dict(m) for m in msgs]
    if msgs[0]["role"] == "system":
        probe = "\x01system probe\x01"
        try: used = probe in fmt([{"role": "system", "content": probe}, {"role": "user", "content": "u"}])
        except Exception: used = False
        if not used:
            msgs = [{**msgs[1], "content": msgs[0]["content"] + "\n" + msgs[1]["content"]}] + msgs[2:] if len(msgs) > 1 else []
    try: return {"text": fmt(msgs)}
    except Exception as e: return {"error": f"{type(e).__name__}: {e}"}


def render_builtin(template, msgs, add_gen):
    "llama.cpp's llama_chat_apply_template (hard-coded formats chosen by the template's text)."
    arr = (llama_cpp.llama_chat_message * len(msgs))(
        *[llama_cpp.llama_chat_message(role=m["role"].encode(), content=m["content"].encode()) for m in msgs])
    size = 8192
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_chat_apply_template(template.encode(), arr, len(msgs), add_gen, buf, size)
    if n < 0: return {"error": f"llama_chat_apply_template returned {n} (template not recognised)"}
    return {"text": buf.raw[:n].decode("utf-8")}


def tokenize(vocab, text, add_special, parse_special):
    data = text.encode("utf-8")
    buf = (llama_cpp.llama_token * (len(data) + 16))()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(data) + 16, add_special, parse_special)
    if n < 0: raise RuntimeError("tokenize buffer too small")
    return list(buf[:n])


def token_text(vocab, tid):
    return llama_cpp.llama_vocab_get_text(vocab, tid).decode("utf-8") if tid >= 0 else ""


def chat_vocabs(args, tmp) -> dict:
    """Family name -> a GGUF whose vocabulary renders and tokenizes that family's template: the two real models, and
    vocab-only files for phi3, llama3 and mistral written into `tmp` by make_tokenizer_fixtures.py."""
    vocabs = {"smollm2": args.smollm2, "gemma3": args.gemma3}
    for fam in ("phi3", "llama3", "mistral"):
        p = Path(tmp) / f"chat-{fam}.gguf"
        r = subprocess.run([args.llmbook_python, str(ROOT / "tools" / "make_tokenizer_fixtures.py"),
                            "--write-chat-vocab", fam, str(p)], capture_output=True, text=True)
        if r.returncode: sys.exit(r.stderr)
        vocabs[fam] = p
    return vocabs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", type=Path, required=True)
    ap.add_argument("--gemma3", type=Path, required=True)
    ap.add_argument("--llama-cpp-src", type=Path, required=True, help="llama.cpp's source tree (models/templates)")
    ap.add_argument("--llmbook-python", default=os.environ.get("LLMBOOK_PY", str(ROOT / ".venv" / "bin" / "python")))
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "chat_templates.json")
    args = ap.parse_args()
    paths = {"smollm2": args.smollm2, "llama_cpp_src": args.llama_cpp_src}
    out = {"about": __doc__.split("\n\n")[0] + " Made by tools/make_chat_fixtures.py; see its docstring.",
           "llama_cpp_python": llama_cpp.__version__, "conversations": CONVERSATIONS, "templates": {}}
    with tempfile.TemporaryDirectory() as tmp:
        vocabs = chat_vocabs(args, tmp)
        for name, (src, vocab_name) in TEMPLATES.items():
            template = template_text(src, paths)
            llm = llama_cpp.Llama(model_path=str(vocabs[vocab_name]), vocab_only=True, verbose=False)
            vocab = llama_cpp.llama_model_get_vocab(llm.model)
            bos, eos = token_text(vocab, llama_cpp.llama_vocab_bos(vocab)), token_text(vocab, llama_cpp.llama_vocab_eos(vocab))
            add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
            cases = []
            for conv, msgs in CONVERSATIONS.items():
                for add_gen in (True, False):
                    case = {"conversation": conv, "add_generation_prompt": add_gen, **render_jinja(template, msgs, add_gen, bos, eos)}
                    if "text" in case:
                        text = case["text"]
                        if add_bos and bos and text.startswith(bos): text = text[len(bos):]
                        case["ids"] = tokenize(vocab, text, True, True)
                    case["builtin"] = render_builtin(template, msgs, add_gen)
                    cases.append(case)
            out["templates"][name] = {"source": src, "vocab": vocab_name, "template": template, "bos_token": bos,
                                      "eos_token": eos, "cases": cases}
            del llm
            n_err = sum("error" in c for c in cases)
            n_same = sum(c.get("text") == c["builtin"].get("text") for c in cases if "text" in c)
            print(f"{name:22s} {len(cases) - n_err} rendered, {n_err} refused; builtin equal on {n_same}", file=sys.stderr)
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} kB)", file=sys.stderr)


if __name__ == "__main__":
    main()
