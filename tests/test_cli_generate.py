"""`llmbook generate`, `chat` and `tokenize` as a user runs them: subprocesses, stdout, stderr, exit status."""
import json, os, re, select, signal, subprocess, sys, time
import pytest
from conftest import llmbook, load_fixture, LLMBOOK_SCRIPT
from llmbook.loading import load
from llmbook.testmodels import write_random_chat_model

def one_error_line(r, *words):
    assert r.returncode != 0 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    for w in words: assert w in last, r.stderr
    return last


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_random_chat_model(tmp_path_factory.mktemp("cli") / "tiny.gguf")


@pytest.fixture(scope="module")
def junk(tmp_path_factory):
    p = tmp_path_factory.mktemp("junk") / "notes.gguf"
    p.write_text("this is not a GGUF file\n" * 10)
    return p


def test_help():
    r = llmbook("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in ("generate", "chat", "tokenize", "inspect"))
    for cmd in ("generate", "chat", "tokenize"):
        r = llmbook(cmd, "--help")
        assert r.returncode == 0 and "--model" in r.stdout, r.stderr
    r = llmbook("generate", "--help")
    for opt in ("--max-tokens", "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed",
                "--threads", "--ctx", "--verbose"):
        assert opt in r.stdout


def test_generate_prints_exactly_the_completion(tiny):
    r = llmbook("generate", "--model", tiny, "--max-tokens", "12", "--temperature", "0", "--seed", "1", "the cat")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout == load(tiny).generate("the cat", max_tokens=12, temperature=0.0, seed=1) + "\n"


def test_generate_sampling_options_and_stdin(tiny):
    args = ["--model", tiny, "-n", "20", "--temperature", "0.9", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.01",
            "--repeat-penalty", "1.1", "--seed", "7", "--ignore-eos"]
    r = llmbook("generate", *args, "the cat")
    want = load(tiny).generate("the cat", max_tokens=20, temperature=0.9, top_k=20, top_p=0.9, min_p=0.01,
                               repeat_penalty=1.1, seed=7, ignore_eos=True)
    assert r.returncode == 0 and r.stdout == want + "\n"
    assert llmbook("generate", *args, "-", input="the cat").stdout == r.stdout       # the prompt from stdin
    assert llmbook("generate", *args[:-3], "--seed", "8", "the cat").stdout != r.stdout


def test_generate_verbose_and_stop(tiny):
    r = llmbook("generate", "--model", tiny, "-n", "8", "--verbose", "--threads", "1", "--ctx", "64", "the cat")
    assert r.returncode == 0 and "tok/s" in r.stderr and "tok/s" not in r.stdout
    full = load(tiny).generate("the cat", max_tokens=30, ignore_eos=True)
    stop = full[10:12]
    r = llmbook("generate", "--model", tiny, "-n", "30", "--ignore-eos", "--stop", stop, "the cat")
    assert r.returncode == 0 and r.stdout == full[:full.find(stop)] + "\n"


@pytest.mark.parametrize("args, words", [
    (["--max-tokens", "abc"], ["invalid int"]), (["--temperature", "-1"], ["temperature"]),
    (["--top-p", "0"], ["top_p"]), (["--max-tokens", "-5"], ["--max-tokens", "-1"]), (["--ctx", "-3"], ["--ctx", "0"]),
    (["--threads", "0"], ["--threads"]), (["--seed", "-2"], ["--seed", "-1 (random)"]), (["--seed", str(2**32)], ["--seed"]),
    (["--bogus"], ["unrecognized"]),
])
def test_generate_bad_arguments(tiny, args, words):
    one_error_line(llmbook("generate", "--model", tiny, *args, "hi"), *words)


def test_generate_missing_prompt():
    r = llmbook("generate")
    assert r.returncode == 2 and "prompt" in r.stderr and "Traceback" not in r.stderr


def test_bad_model_files(tmp_path, junk):
    for cmd in (["generate", "hi"], ["chat"], ["tokenize", "hi"]):
        one_error_line(llmbook(*cmd[:1], "--model", tmp_path / "missing.gguf", *cmd[1:], input="hi\n"), "missing.gguf")
        one_error_line(llmbook(*cmd[:1], "--model", junk, *cmd[1:], input="hi\n"), "error")
        one_error_line(llmbook(*cmd[:1], "--model", tmp_path, *cmd[1:], input="hi\n"), "error")


def test_prompt_longer_than_context(tiny):
    # the error names the flag and a value that takes the prompt and the tokens asked for (here the trained 256)
    one_error_line(llmbook("generate", "--model", tiny, "--ctx", "16", "a b c d e f g h i j k l m n o p q r s t"),
                   "the prompt is", "(--ctx 16)", "run with --ctx 256", "trained on 256 tokens")
    one_error_line(llmbook("generate", "--model", tiny, "--ctx", "16", "-n", "8", "a b c d e f g h i j k l m n o p q r s t"),
                   "run with --ctx 256")
    one_error_line(llmbook("generate", "--model", tiny, "--ctx", "16", "a " * 300), "trained on 256 tokens: shorten the prompt")


def test_chat_from_a_pipe(tiny):
    r = llmbook("chat", "--model", tiny, "-n", "6", input="hello\nand then?\n")
    assert r.returncode == 0, r.stderr
    s = load(tiny).session()
    want = [s.chat("hello", max_tokens=6), s.chat("and then?", max_tokens=6)]
    assert r.stdout == "".join(w + "\n" for w in want)
    assert "> " not in r.stdout                                          # no prompt clutter when piped


def test_chat_reset_empty_line_system(tiny):
    r = llmbook("chat", "--model", tiny, "-n", "6", "--system", "Be brief.", input="hello\n/reset\nhello\n\nnot read\n")
    assert r.returncode == 0, r.stderr
    want = load(tiny).chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}], max_tokens=6)
    assert r.stdout == f"{want}\n{want}\n"                                # /reset: the same first turn again; "" quits
    r = llmbook("chat", "--model", tiny, input="")
    assert r.returncode == 0 and r.stdout == ""


def test_chat_context_full_goes_on(tiny):
    r = llmbook("chat", "--model", tiny, "--ctx", "120", "-n", "4", input="hi\n" + "x " * 200 + "\n/reset\nhi\n")
    assert r.returncode == 0, r.stderr
    assert "no longer fits in the context of 120 tokens (--ctx)" in r.stderr and r.stdout.count("\n") == 2


def test_chat_without_template(tmp_path):
    # a file with no template gets its family's built-in (chapter 18), said once on stderr in the command's words
    p = write_random_chat_model(tmp_path / "nt.gguf", chat_template=None)
    r = llmbook("chat", "--model", p, "-n", "4", input="hi\nagain\n")
    assert r.returncode == 0 and r.stdout.count("\n") == 2, r.stderr
    assert r.stderr.count("chat template: built-in chatml, chosen by architecture llama") == 1 and "Warning" not in r.stderr
    want = load(p).chat([{"role": "user", "content": "hi"}], max_tokens=4, template="chatml")
    assert r.stdout.splitlines()[0] == want


def test_chat_template_by_name_and_file(tiny, tmp_path):
    r = llmbook("chat", "--model", tiny, "-n", "4", "--chat-template", "llama3", input="hi\n")
    assert r.returncode == 0 and "chat template: built-in llama3" in r.stderr, r.stderr
    assert r.stdout == load(tiny).chat([{"role": "user", "content": "hi"}], max_tokens=4, template="llama3") + "\n"
    f = tmp_path / "t.jinja"
    f.write_text("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant] ")
    r = llmbook("chat", "--model", tiny, "-n", "4", "--chat-template", f, input="hi\n")
    assert r.returncode == 0 and f"chat template: the file {f}" in r.stderr, r.stderr
    assert r.stdout == load(tiny).chat([{"role": "user", "content": "hi"}], max_tokens=4, template=str(f)) + "\n"
    one_error_line(llmbook("chat", "--model", tiny, "--chat-template", "nonesuch", input="hi\n"), "unknown chat template", "chatml")


def test_gemma3_chats_out_of_the_box(gemma3_path):
    # Gemma 3's file has no template: the built-in gemma, chosen by its architecture
    r = llmbook("chat", "--model", gemma3_path, "-n", "8", input="Say hi.\n")
    assert r.returncode == 0 and r.stdout.strip() and "built-in gemma, chosen by architecture gemma3" in r.stderr, r.stderr


def test_tokenize(tiny, smollm2_path):
    r = llmbook("tokenize", "--model", tiny, "the theme")
    assert r.returncode == 0 and json.loads(r.stdout) == load(tiny).tokenizer.encode("the theme")
    text = "Hello <|im_start|>world"
    tok = load(smollm2_path).tokenizer
    r = llmbook("tokenize", "--model", smollm2_path, text)
    assert json.loads(r.stdout) == tok.encode(text, add_special=True, parse_special=True)
    r = llmbook("tokenize", "--model", smollm2_path, "--no-parse-special", "--pieces", text)
    ids = tok.encode(text, add_special=True, parse_special=False)
    lines = r.stdout.splitlines()
    assert [int(l.split()[0]) for l in lines] == ids
    assert "".join(json.loads(l.split(None, 1)[1]) for l in lines) == text
    one_error_line(llmbook("tokenize"), "text")


def test_generate_greedy_matches_llamacpp(real_model_path):
    "`llmbook generate` on the real models prints llama.cpp's greedy continuation (fixtures from llama.cpp)."
    name = "smollm2" if "SmolLM2" in real_model_path.name else "gemma3"
    case = next(c for c in load_fixture(f"greedy_{name}.json")["cases"] if c["prompt"] == "1, 2, 3, 4, 5,")
    n = 6
    r = llmbook("generate", "--model", real_model_path, "--max-tokens", n, "--temperature", "0", "--seed", "0", case["prompt"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == load(real_model_path).tokenizer.decode_bytes(case["cont"][:n]).decode() + "\n"


def test_readme_quick_start_default_model(smollm2_path):
    "The README's first command (with fewer tokens): the embedded model, greedy, as llama.cpp."
    case = load_fixture("greedy_smollm2.json")["cases"][0]
    assert case["prompt"] == "The three primary colors are"
    r = llmbook("generate", "--max-tokens", case["n_clear"], case["prompt"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["text"] + "\n"


def test_generate_penalties_bias_and_logprobs(tiny):
    args = ["--model", tiny, "-n", "16", "--temperature", "0.8", "--seed", "3", "--presence-penalty", "0.5",
            "--frequency-penalty", "0.3", "--penalty-last-n", "-1", "--logit-bias", "5=-inf", "--logit-bias", "7=2.5",
            "--ignore-eos"]
    r = llmbook("generate", *args, "the cat")
    want = load(tiny).generate("the cat", max_tokens=16, temperature=0.8, seed=3, presence_penalty=0.5,
                               frequency_penalty=0.3, penalty_last_n=-1, logit_bias={5: float("-inf"), 7: 2.5},
                               ignore_eos=True)
    assert r.returncode == 0 and r.stdout == want + "\n", r.stderr
    r = llmbook("generate", *args, "--logprobs", "2", "the cat")
    lines = [json.loads(x) for x in r.stderr.splitlines() if x.startswith("{")]
    assert r.stdout == want + "\n" and [x["id"] for x in lines] == want.tokens
    assert all(len(x["top"]) == 2 and x["logprob"] <= 0 for x in lines)


def test_generate_grammar_and_json_schema(tiny, tmp_path):
    from llmbook.grammar import Grammar, json_schema_to_grammar
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "The " [a-z]{1,8} (" " [a-z]{1,8}){0,3} "."   # a sentence\n')
    r = llmbook("generate", "--model", tiny, "-n", "60", "--grammar", g, "Say:")
    assert r.returncode == 0 and Grammar(g.read_text()).accepts_text(r.stdout[:-1], complete=False), r.stdout
    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    r = llmbook("generate", "--model", tiny, "-n", "40", "--json-schema", schema, "--temperature", "0.9", "--seed", "3", "x")
    assert r.returncode == 0 and Grammar(json_schema_to_grammar(schema)).accepts_text(r.stdout[:-1], complete=False)
    (tmp_path / "s.json").write_text(schema)
    r2 = llmbook("generate", "--model", tiny, "-n", "40", "--json-schema", tmp_path / "s.json", "--temperature", "0.9", "--seed", "3", "x")
    assert r2.stdout == r.stdout


@pytest.mark.parametrize("args, words", [
    (["--grammar", "/nonexistent.gbnf"], ["no such file"]),
    (["--json-schema", '{"type": "string", "pattern": "(?=a)b"}'], ["pattern", "look-around"]),
    (["--json-schema", '{"type": '], ["not valid JSON"]),
    (["--logit-bias", "5"], ["ID=BIAS"]), (["--logit-bias", "x=1"], ["ID=BIAS"]), (["--logit-bias", "5=inf"], ["ID=BIAS"]),
    (["--logit-bias", "99999999=1"], ["outside the vocabulary"]), (["--logprobs", "50"], ["logprobs"]),
    (["--penalty-last-n", "-2"], ["penalty_last_n"]),
])
def test_generate_bad_constraint_arguments(tiny, args, words):
    one_error_line(llmbook("generate", "--model", tiny, *args, "hi"), *words)


def test_grammar_file_errors_name_line_and_column(tiny, tmp_path):
    g = tmp_path / "bad.gbnf"
    g.write_text('root ::= item\nitem ::= "a" | [b-\n')
    one_error_line(llmbook("generate", "--model", tiny, "--grammar", g, "hi"), "line 2, column 16", "character class")
    one_error_line(llmbook("generate", "--model", tiny, "--grammar", g, "--json-schema", "{}", "hi"), "not both")


def test_version_and_inspect_default():
    r = llmbook("--version")
    assert r.returncode == 0 and re.fullmatch(r"llmbook \d+\.\d+\.\d+\n", r.stdout)
    r = llmbook("inspect", "--key", "general.name")                     # the embedded model, as every other command
    assert r.returncode == 0 and "SmolLM2" in r.stdout or "Smollm2" in r.stdout, r.stderr


def test_seed_and_count_conventions(tiny):
    args = ["generate", "--model", tiny, "-n", "16", "--temperature", "0.9", "--ignore-eos", "the cat"]
    a, b = llmbook(*args), llmbook(*args)
    assert a.returncode == b.returncode == 0 and a.stdout != b.stdout   # no --seed: a random seed each run, as llama-cli
    r = llmbook(*args, "--seed", "-1", "-v")
    seed = int(re.search(r"seed (\d+)", r.stderr).group(1))
    assert llmbook(*args, "--seed", seed).stdout == r.stdout             # the seed printed repeats the text
    assert r.stdout == load(tiny).generate("the cat", max_tokens=16, temperature=0.9, ignore_eos=True, seed=seed) + "\n"
    r = llmbook("generate", "--model", tiny, "-n", "-1", "--ignore-eos", "--ctx", "40", "the cat")   # -1: until the end
    assert r.returncode == 0 and "context is full (40 tokens)" in r.stderr and "--ctx 80 gives it room" in r.stderr
    assert r.stdout == load(tiny, n_ctx=40).generate("the cat", max_tokens=None, ignore_eos=True) + "\n"


def test_ctx_zero_and_warnings(tiny):
    r = llmbook("generate", "--model", tiny, "-n", "-1", "--ignore-eos", "--ctx", "0", "the cat")    # 0: the trained 256
    assert r.returncode == 0 and "context is full (256 tokens)" in r.stderr and "trained on 256 tokens" in r.stderr
    r = llmbook("generate", "--model", tiny, "-n", "2", "--ctx", "512", "--threads", (os.cpu_count() or 1) + 1, "the cat")
    assert r.returncode == 0 and "--ctx 512 is past the 256 tokens" in r.stderr and "more than this machine's" in r.stderr
    assert r.stderr.count("warning") == 2


def _start(*args):
    cmd = [str(LLMBOOK_SCRIPT)] if LLMBOOK_SCRIPT.exists() else [sys.executable, "-m", "llmbook.cli"]
    return subprocess.Popen(cmd + [str(a) for a in args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

def _read_until(p, n_bytes: int, timeout: float = 120) -> bytes:
    "What `p` printed on stdout, once it has printed at least `n_bytes` (a reply well under way)."
    got, t0 = b"", time.time()
    while len(got) < n_bytes and time.time() - t0 < timeout:
        if select.select([p.stdout], [], [], 1)[0]: got += os.read(p.stdout.fileno(), 4096)
    return got


def test_ctrl_c_ends_generate_with_its_text_and_timings(smollm2_path):
    prompt = "Once upon a time"
    p = _start("generate", "-n", 300, "--ignore-eos", prompt)
    got = _read_until(p, 40)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    out, err = (got + out).decode(), err.decode()
    full = load(smollm2_path).generate(prompt, max_tokens=300, ignore_eos=True)
    assert p.returncode == 130 and out.endswith("\n") and full.startswith(out[:-1]) and len(out) - 1 < len(full)
    assert "stopped (Ctrl-C)" in err and "stop: cancelled" in err and "tok/s" in err and "Traceback" not in err


def test_ctrl_c_stops_a_chat_reply_and_the_chat_goes_on(smollm2_path):
    first, second = "Write a long story about a dragon and a knight.", "What was the knight's name? Answer in a few words."
    p = _start("chat", "-n", 300)
    p.stdin.write(first.encode() + b"\n"); p.stdin.flush()
    got = _read_until(p, 40)
    p.send_signal(signal.SIGINT)                                        # stop the story, not the program
    time.sleep(0.5)
    p.stdin.write(second.encode() + b"\n"); p.stdin.flush()
    out, err = p.communicate(b"", timeout=120)                          # then the end of input ends the chat
    out, err = (got + out).decode(), err.decode()
    assert p.returncode == 0 and err.count("stopped (Ctrl-C)") == 1 and "Traceback" not in err, err
    m = load(smollm2_path)
    story = m.chat([{"role": "user", "content": first}], max_tokens=300)
    # the cut story is a prefix of the whole one; it stays in the conversation, and the answer to the second
    # message is the one the library gives after it
    cuts = [i for i in range(1, len(story)) if out[i:i + 1] == "\n" and out[:i] == story[:i]]
    def answer(cut):
        s = m.session()
        s.messages = [{"role": "user", "content": first}, {"role": "assistant", "content": out[:cut]}]
        return s.chat(second, max_tokens=300)
    assert any(out[cut + 1:] == answer(cut) + "\n" for cut in cuts), out


def test_json_schema_answer_ends_with_the_json(smollm2_path):
    # JSON's rules allow whitespace after a value, and SmolLM2 used to pad its answer with blank lines and tabs
    # before its end token; the answer now ends where the value does
    schema = '{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}'
    r = llmbook("generate", "-n", 100, "-v", "--json-schema", schema, "A person, as JSON:")
    assert r.returncode == 0 and "stop: eos" in r.stderr, r.stderr
    assert r.stdout.endswith("}\n") and set(json.loads(r.stdout)) == {"name", "age"}
    from llmbook.grammar import as_grammar
    m = load(smollm2_path)
    for t in (0.0, 0.9):
        c = m.chat([{"role": "user", "content": "Give me a person as JSON."}], grammar=as_grammar(json_schema=schema),
                   temperature=t, seed=1, max_tokens=100)
        assert c.stop_reason == "eos" and str(c).endswith("}"), repr(str(c))
