"""The README's examples run from the repository root as written, and print what the README shows.

README.md is nbs/index.ipynb rendered (tests/test_docs.py checks that), so its code blocks are the index's cells
and the outputs under them are the cells' saved outputs. Here the index runs again, on a fresh kernel whose working
directory is the repository's root (where a reader pastes the blocks), and every output must be what was saved:
the engine gives one answer, so a printed number is a fact, and a change in the package that moves one fails here
until the index is executed again (`python tools/execute_nbs.py index && python tools/docs_html.py --readme`).
Timings (an output with "tok/s") are the one thing a run cannot repeat; they are left out.

One answer is one answer per kind of CPU: AVX-512 and AVX2 kernels add in vectors of 16 and of 8 lanes, so their
logits differ in the last bits, and a greedy generation can part from the other at a near tie (SmolLM2's first
generation here does). So every output is compared on a CPU of the kind the index was run on (its first cell
records the CPU); on another kind, the outputs that the kernels' numbers decide (`KERNEL_DEPENDENT`) are only run.
The "Use it" section's blocks (the library, `llmbook serve` under curl and under the openai client) run too."""
import json, os, re, subprocess, sys
from pathlib import Path
import nbformat
import pytest
from nbclient import NotebookClient
from conftest import serve_process

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# cells whose output the kernels' sums decide (logits, generated tokens): compared only on the same kind of CPU
KERNEL_DEPENDENT = ("m.logits(ids)", "m.generate(prompt", "completion.tokens", "batch = m.logits")


def numeric_kind(isa) -> tuple:
    "What in a CPU decides the kernels' sums: 16 lanes or 8 (AVX-512 or AVX2), and VNNI's byte dot products."
    isa = {f.replace("_", "") for f in isa}                    # /proc/cpuinfo's avx512_vnni is LLVM's avx512vnni
    return "avx512f" in isa, bool({"avx512vnni", "avxvnni"} & isa)


def output_text(cell) -> str:
    "What a code cell showed: its streams and its results' text (Markdown before plain text), in order."
    parts = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream": parts.append(o["text"])
        elif o["output_type"] in ("execute_result", "display_data"):
            data = o["data"]
            parts.append(data.get("text/markdown") or data.get("text/plain", ""))
        elif o["output_type"] == "error": parts.append(f"{o['ename']}: {o['evalue']}")
    return "".join(parts)


def same_print(saved: str, now: str) -> bool:
    """Equal text, except that a printed decimal may move by one unit in its last digit: a value that sits on a
    rounding boundary of what is printed. Anything larger is a change (CPUs of another kind: see the docstring)."""
    if NUMBER.sub("#", saved) != NUMBER.sub("#", now): return False
    for a, b in zip(NUMBER.findall(saved), NUMBER.findall(now)):
        if a == b: continue
        if "." not in a or "." not in b or len(a.split(".")[1]) != len(b.split(".")[1]): return False
        if abs(float(a) - float(b)) > 1.01 * 10 ** -len(a.split(".")[1]): return False
    return True


@pytest.fixture(scope="module")
def index_run(tmp_path_factory):
    "The index's saved cells and the same cells run again from the repository's root."
    saved = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    fresh = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    NotebookClient(fresh, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    return [c for c in saved.cells if c.cell_type == "code"], [c for c in fresh.cells if c.cell_type == "code"]


def test_readme_blocks_print_what_the_readme_shows(index_run):
    from llmbook.int8 import target_features
    saved, fresh = index_run
    recorded = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4).cells[0].metadata["llmbook"]["run_on"]["isa"]
    same_kind = numeric_kind(recorded) == numeric_kind(target_features())
    compared, stale = 0, []
    for a, b in zip(saved, fresh):
        was, now = output_text(a), output_text(b)
        assert "Error" not in now.split(":")[0], f"{a.source.splitlines()[0]!r} failed from the repository root: {now}"
        if "tok/s" in was: continue                                       # a timing: never the same twice
        if not same_kind and any(k in a.source for k in KERNEL_DEPENDENT): continue
        if not same_print(was, now): stale.append(f"{a.source[:200]}\n--- shown:\n{was}\n--- printed now:\n{now}")
        compared += bool(was)
    assert not stale, ("the README shows outputs this code no longer prints (run `python tools/execute_nbs.py index "
                       "&& python tools/docs_html.py --readme`):\n" + "\n\n".join(stale))
    assert compared >= (8 if same_kind else 4)


def test_same_print_allows_only_a_last_digit():
    assert same_print("logit 18.48 probability 0.187", "logit 18.49 probability 0.186")
    assert not same_print("logit 18.48 probability 0.187", "logit 18.51 probability 0.184")
    assert not same_print("the same first 8 tokens", "the same first 9 tokens")
    assert not same_print("' the'", "' a'")


def use_it_blocks() -> dict:
    "The README's 'Use it' section: its python and sh code blocks, in order."
    text = (ROOT / "README.md").read_text()
    section = text.split("## Use it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(python|sh)\n(.*?)```", section, re.S)
    return {"python": [b for k, b in blocks if k == "python"], "sh": [b for k, b in blocks if k == "sh"]}


def test_use_it_library_block_runs_from_the_root():
    first = use_it_blocks()["python"][0]
    r = subprocess.run([sys.executable, "-c", first], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.count("\n") >= 4 and "Paris" in r.stdout, r.stdout


def test_use_it_serve_blocks_work_under_curl_and_openai():
    pytest.importorskip("openai")
    blocks = use_it_blocks()
    curl = next(line for b in blocks["sh"] for line in [b.replace("\\\n", " ")] if "curl" in line)
    curl = curl[curl.index("curl"):].strip()
    client = blocks["python"][1]
    with serve_process() as base:                       # the README's server, on a free port instead of 8080
        port = base.rsplit(":", 1)[1].strip("/")
        r = subprocess.run(["bash", "-c", curl.replace("8080", port)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and json.loads(r.stdout)["choices"][0]["message"]["content"], r.stdout + r.stderr
        r = subprocess.run([sys.executable, "-c", client.replace("8080", port)], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip(), r.stderr
