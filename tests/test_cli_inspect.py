"""`llmbook inspect` as a user runs it: a subprocess, stdout, stderr, exit status."""
import json, subprocess, sys
import numpy as np
import pytest
from conftest import llmbook
from llmbook.gguf import GGUFWriter, GGUFFile
from llmbook.tensors import GGMLType, QTensor

@pytest.fixture
def small(tmp_path):
    w = GGUFWriter(tmp_path / "small.gguf", arch="llama")
    w.add("general.name", "small test model")
    w.add("llama.block_count", 1, 4)
    w.add("tokenizer.ggml.tokens", [f"tok{i}" for i in range(1000)])
    w.add("tokenizer.chat_template", "{% for m in messages %}" * 20)
    w.add_tensor("token_embd.weight", np.zeros((1000, 32), np.float32))
    w.add_tensor("blk.0.attn_q.weight", QTensor(np.zeros(32 * 34, np.uint8), GGMLType.Q8_0, (32, 32)))
    return w.write()


def test_inspect_small(small):
    r = llmbook("inspect", small)
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout
    for text in ["GGUF version: 3", "architecture: llama", "'small test model'", "[1000 items: 'tok0', 'tok1'",
                 "token_embd.weight", "blk.0.attn_q.weight", "Q8_0", "(1000, 32)", "1 F32, 1 Q8_0", "chars)"]:
        assert text in out, text
    assert out.count("\n") < 40                            # long values are shortened to one line each


def test_inspect_key_and_max_tensors(small):
    r = llmbook("inspect", small, "--key", "tokenizer.ggml.tokens")
    assert r.returncode == 0 and json.loads(r.stdout) == [f"tok{i}" for i in range(1000)]
    r = llmbook("inspect", small, "--max-tensors", "1")
    assert r.returncode == 0 and "token_embd.weight" in r.stdout and "blk.0.attn_q.weight" not in r.stdout and "1 more" in r.stdout


def test_inspect_smollm2(smollm2_path):
    r = llmbook("inspect", smollm2_path)
    assert r.returncode == 0, r.stderr
    f = GGUFFile(smollm2_path)
    assert "architecture: llama" in r.stdout and "[49152 items: '<|endoftext|>'" in r.stdout
    for name in f.tensors: assert name in r.stdout
    assert "210 Q4_1, 61 F32, 1 Q8_0" in r.stdout


def test_python_dash_m(small):
    r = subprocess.run([sys.executable, "-m", "llmbook.cli", "inspect", str(small)], capture_output=True, text=True)
    assert r.returncode == 0 and "architecture: llama" in r.stdout


def _one_line_error(r, *words):
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("llmbook inspect: error: ")
    for w in words: assert w in r.stderr, (w, r.stderr)


def test_missing_file(tmp_path):
    _one_line_error(llmbook("inspect", tmp_path / "nope.gguf"), "no such file", "nope.gguf")


def test_not_gguf(tmp_path):
    p = tmp_path / "readme.txt"; p.write_text("hello, this is not a model\n")
    _one_line_error(llmbook("inspect", p), "readme.txt", "magic", "not a GGUF file")


def test_corrupt_gguf(small, tmp_path):
    p = tmp_path / "cut.gguf"
    p.write_bytes(small.read_bytes()[:3000])              # cut inside the vocabulary
    _one_line_error(llmbook("inspect", p), "cut.gguf", "at byte")


def test_directory(tmp_path):
    _one_line_error(llmbook("inspect", tmp_path), "directory")


def test_missing_key(small):
    _one_line_error(llmbook("inspect", small, "--key", "general.nope"), "general.nope")


def test_usage():
    r = llmbook()
    assert r.returncode != 0 and "inspect" in r.stderr
    r = llmbook("inspect", "--help")
    assert r.returncode == 0 and "--max-tensors" in r.stdout
    r = llmbook("nosuchcommand")
    assert r.returncode == 2 and "invalid choice" in r.stderr


LATER_PARTS = ("llmbook.serve", "llmbook.hf", "fastapi", "uvicorn")

def imported_by(code: str) -> list:
    "Which of chapter 27's and 14's modules (and FastAPI, uvicorn) a fresh Python has imported after `code`."
    probe = code + f"\nimport sys; print([m for m in {LATER_PARTS!r} if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))

def cli_run(*args) -> str:
    "Code that runs `llmbook ARGS` in-process through `main`, its output and `--help`'s exit swallowed."
    return ("import contextlib, io\nfrom llmbook.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try: main({list(args)!r})\n    except SystemExit: pass")

def test_help_lists_every_command_and_imports_no_later_chapter():
    r = llmbook("--help")
    assert r.returncode == 0
    for name in ["inspect", "generate", "chat", "tokenize", "quantize", "perplexity", "bench", "serve", "convert"]:
        assert f"\n    {name}" in r.stdout, name
    assert imported_by("import llmbook, llmbook.cli") == []
    assert imported_by(cli_run("--help")) == []
    assert imported_by(cli_run("inspect", "--help")) == []
    assert imported_by(cli_run("convert", "--help")) == ["llmbook.hf"]       # the control: the probe sees imports

def test_later_commands_and_names_load_when_used():
    r = llmbook("convert", "--help")
    assert r.returncode == 0 and "checkpoint directory" in r.stdout
    r = llmbook("serve", "--help")
    assert r.returncode == 0 and "--port" in r.stdout
    # the public names of chapters 27 and 22 are still llmbook's, imported on first use
    assert imported_by("import llmbook\nassert callable(llmbook.convert) and callable(llmbook.export_hf)") == ["llmbook.hf"]
    assert "llmbook.serve" in imported_by("import llmbook\nassert callable(llmbook.make_app)")
