"""Make tests/fixtures/chat_builtins.json: llama.cpp's built-in chat templates by name (chatml, llama3, gemma, phi3,
mistral-v7, mistral-v3, llama2; qwen is our second name for chatml), for the conversations of make_chat_fixtures.py,
as text and token ids, with the families' released Jinja templates rendered beside them where we have them.

    $REFPY tools/make_chat_builtin_fixtures.py --smollm2 SmolLM2.gguf --gemma3 gemma-3-270m.gguf

The reference is llama.cpp's C++ (`llama_chat_apply_template` given the name, src/llama-chat.cpp): what
`llama-cli --chat-template NAME` lays out. It never writes the BOS text (the tokenizer adds the BOS token);
the families' released templates for Gemma 3, Llama 3, Mistral and Llama 2 write `{{ bos_token }}` first, and so do
llmbook's built-ins of those names, so the expected `text` is the BOS text + llama.cpp's text for them (BOS_WRITTEN),
llama.cpp's text alone for the others. `ids` are llama.cpp's tokens of llama.cpp's text (add_special=True,
parse_special=True): the same tokens either way, since llmbook's `chat_prompt` keeps one BOS.

`family`: the family's own Jinja template (text stored here) rendered by llama-cpp-python's Jinja2ChatFormatter,
for the names whose released template lays out these conversations as llama.cpp's C++ does: Gemma 3's
(google/gemma-3-*-it tokenizer_config.json), Meta-Llama-3-8B-Instruct's, Mistral-Large-Instruct-2411's (the v7
layout, as quoted in llama.cpp's tests/test-chat-template.cpp) and the ChatML that llama.cpp's server falls back
to (CHATML_TEMPLATE_SRC, common/chat.cpp). The script fails if one of them disagrees with the C++ layout.
Vocabularies: SmolLM2's file for chatml, Gemma 3's for gemma, tools/family_models.CHAT_VOCABS (written by llmbook's
GGUFWriter in a second Python, --llmbook-python) for the others.
"""
import argparse, json, os, sys, tempfile
from pathlib import Path
import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from make_chat_fixtures import CONVERSATIONS, S, U1, U2, chat_vocabs, render_builtin, tokenize, token_text

# llmbook's name: (llama.cpp's name, vocabulary)
BUILTINS = {"chatml": ("chatml", "smollm2"), "qwen": ("chatml", "smollm2"), "llama3": ("llama3", "llama3"),
            "gemma": ("gemma", "gemma3"), "phi3": ("phi3", "phi3"), "mistral-v7": ("mistral-v7", "mistral"),
            "mistral-v3": ("mistral-v3", "mistral"), "llama2": ("llama2", "mistral")}
BOS_WRITTEN = {"llama3", "gemma", "mistral-v7", "mistral-v3", "llama2"}

GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
MISTRAL_V7 = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
              "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + "
              "message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + "
              "message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are "
              "supported!') }}{% endif %}{% endfor %}")
CHATML = ("{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
          "{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\\n' -}}\n{%- endif -%}")
FAMILY = {"gemma": ("google/gemma-3-*-it tokenizer_config.json", GEMMA3),
          "llama3": ("meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json", LLAMA3),
          "mistral-v7": ("mistralai/Mistral-Large-Instruct-2411 (llama.cpp tests/test-chat-template.cpp)", MISTRAL_V7),
          "chatml": ("llama.cpp common/chat.cpp CHATML_TEMPLATE_SRC", CHATML)}

A_SPACES = {"role": "assistant", "content": "  Paris. "}
BUILTIN_CONVERSATIONS = {**CONVERSATIONS, "system_multi_turn_spaces": [S, U1, A_SPACES, U2]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", type=Path, required=True)
    ap.add_argument("--gemma3", type=Path, required=True)
    ap.add_argument("--llmbook-python", default=os.environ.get("LLMBOOK_PY", str(ROOT / ".venv" / "bin" / "python")))
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "chat_builtins.json")
    args = ap.parse_args()
    out = {"about": __doc__.split("\n\n")[0] + " Made by tools/make_chat_builtin_fixtures.py; see its docstring.",
           "llama_cpp_python": llama_cpp.__version__, "conversations": BUILTIN_CONVERSATIONS, "builtins": {}}
    with tempfile.TemporaryDirectory() as tmp:
        vocabs = chat_vocabs(args, tmp)
        for name, (cpp_name, vocab_name) in BUILTINS.items():
            llm = llama_cpp.Llama(model_path=str(vocabs[vocab_name]), vocab_only=True, verbose=False)
            vocab = llama_cpp.llama_model_get_vocab(llm.model)
            bos, eos = token_text(vocab, llama_cpp.llama_vocab_bos(vocab)), token_text(vocab, llama_cpp.llama_vocab_eos(vocab))
            cases = []
            for conv, msgs in BUILTIN_CONVERSATIONS.items():
                for add_gen in (True, False):
                    b = render_builtin(cpp_name, msgs, add_gen)
                    if "error" in b: sys.exit(f"{name} ({cpp_name}): {b['error']}")
                    case = {"conversation": conv, "add_generation_prompt": add_gen, "builtin": b["text"],
                            "text": (bos if name in BOS_WRITTEN else "") + b["text"],
                            "ids": tokenize(vocab, b["text"], True, True)}
                    if name in FAMILY:
                        f = Jinja2ChatFormatter(FAMILY[name][1], eos_token=eos, bos_token=bos, add_generation_prompt=add_gen)
                        case["family"] = f(messages=[dict(m) for m in msgs]).prompt
                        if case["family"] != case["text"]:
                            sys.exit(f"{name} {conv} gen={add_gen}: the family's template gives {case['family']!r}, "
                                     f"llama.cpp's C++ {case['text']!r}")
                    cases.append(case)
            out["builtins"][name] = {"llama_cpp_name": cpp_name, "vocab": vocab_name, "bos_token": bos, "eos_token": eos,
                                     "family_source": FAMILY.get(name, (None,))[0],
                                     "family_template": FAMILY.get(name, (None, None))[1], "cases": cases}
            del llm
            print(f"{name:11s} {len(cases)} cases ({cpp_name}, vocab {vocab_name})", file=sys.stderr)
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} kB)", file=sys.stderr)


if __name__ == "__main__":
    main()
