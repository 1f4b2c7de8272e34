"""`llmbook generate`, `chat` and `tokenize` as a user runs them: subprocesses, stdout, stderr, exit status."""
import json
import pytest
from conftest import llmbook, load_fixture
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
    (["--top-p", "0"], ["top_p"]), (["--max-tokens", "-5"], ["max_tokens"]), (["--ctx", "0"], ["n_ctx"]),
    (["--threads", "0"], ["n_threads"]), (["--bogus"], ["unrecognized"]),
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
    one_error_line(llmbook("generate", "--model", tiny, "--ctx", "16", "a b c d e f g h i j k l m n o p q r s t"), "do not fit")


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
    assert "do not fit" in r.stderr and r.stdout.count("\n") == 2


def test_chat_without_template(tmp_path):
    p = write_random_chat_model(tmp_path / "nt.gguf", chat_template=None)
    one_error_line(llmbook("chat", "--model", p, input="hi\n"), "no chat template")


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
    r = llmbook("generate", "--model", tiny, "-n", "40", "--json-schema", schema, "--temperature", "0.9", "x")
    assert r.returncode == 0 and Grammar(json_schema_to_grammar(schema)).accepts_text(r.stdout[:-1], complete=False)
    (tmp_path / "s.json").write_text(schema)
    r2 = llmbook("generate", "--model", tiny, "-n", "40", "--json-schema", tmp_path / "s.json", "--temperature", "0.9", "x")
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
