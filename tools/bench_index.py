"""The speed table of the book's index page: llmbook against llama.cpp, same machine, same files, same threads.

    python tools/bench_index.py                 # both real models (and the 1B-shaped file if made), 2 threads
    REFPY=/path/to/python-with-llama_cpp python tools/bench_index.py --threads 4

llmbook's side is `llmbook bench --json` (a random prompt of N token ids, then greedy decoding, best of R
runs). llama.cpp's side (through llama-cpp-python, in its own interpreter: llmbook never imports it) runs the
same prompt ids (numpy's generator, same seed) the same way: `eval(prompt)`, then one token at a time.
The two sides alternate for a few rounds and the best of each counts, so that load from other programs
on the machine does not favour one side.
Prints one Markdown row per model as it goes, with the kernel set llmbook chose. With `--write` it also writes
bench/speed.json, the one source of the speed table on nbs/index.ipynb ("How fast, against llama.cpp"): the CPU
(model name and instruction sets), threads, llama-cpp-python's version, the date, the method and, per model, the
prefill and decode tokens/s of both sides. Then re-run the index (`python tools/execute_nbs.py index`) and
README.md (`python tools/docs_html.py --readme`).

    python tools/bench_index.py --write            # measure, then write bench/speed.json
    python tools/bench_index.py --depth 8000 --write   # only the row of a decode step deep in a context, into it
    python tools/bench_index.py --only BF16 --write    # only the rows whose names contain BF16, into the table

`--depth N` measures the embedded SmolLM2's decode after N tokens already in the context (n_ctx N + 192): each
side fills its cache with N random token ids, then times `--gen-tokens` single-token steps (their total); the
row is kept in bench/speed.json beside the others ("depth"), and a later full run keeps it.

The Llama-3.2-1B-shaped file is `bench/make_llama1b.py`'s (random weights: speed only). The rows for float weights
and gpt-oss are measured when their files exist (`--models-dir`, default /work/models):

    llmbook quantize --type F16 $(python -c "from llmbook.model import default_model_path as p; print(p())") smollm2-f16.gguf
    $REFPY -c "import llama_cpp as l; p = l.llama_model_quantize_default_params(); p.ftype = 32; \
               l.llama_model_quantize(b'smollm2-f16.gguf', b'smollm2-bf16.gguf', p)"      # llama.cpp's BF16
    .venv/bin/python bench/make_llama1b.py --keep-f16 llama1b-f16.gguf
    .venv/bin/python bench/make_gptoss.py gptoss-4l-f16attn.gguf --layers 4 --vocab 49152 --attn-type F16
"""
import argparse, datetime, json, os, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
from conftest import smollm2_file, gemma3_file  # noqa: E402  (where the tests find the real models)
from execute_nbs import cpu_info                # noqa: E402  (the CPU record the notebooks' runs use too)
SPEED_JSON = ROOT / "bench" / "speed.json"

LLAMA_CPP = r"""
import json, sys, time, numpy as np
import llama_cpp
from llama_cpp import Llama
path, n_prompt, n_gen, repeat, threads = sys.argv[1], *map(int, sys.argv[2:6])
llm = Llama(model_path=path, n_ctx=n_prompt + n_gen + 8, n_threads=threads, n_threads_batch=threads, verbose=False)
prompt = np.random.default_rng(0).integers(0, llm.n_vocab(), n_prompt).tolist()
def run():
    llm.reset(); t0 = time.perf_counter(); llm.eval(prompt); t1 = time.perf_counter()
    token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    for _ in range(n_gen):
        llm.eval([token]); token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    return t1 - t0, time.perf_counter() - t1
run()                                                  # warm-up
best = [min(t) for t in zip(*(run() for _ in range(repeat)))]
print(json.dumps(dict(prefill=n_prompt / best[0], decode=n_gen / best[1], version=llama_cpp.__version__)))
"""

LLAMA_CPP_DEPTH = r"""
import json, sys, time, numpy as np
import llama_cpp
from llama_cpp import Llama
path, depth, n_gen, threads = sys.argv[1], *map(int, sys.argv[2:5])
llm = Llama(model_path=path, n_ctx=depth + 192, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=False)
ids = np.random.default_rng(0).integers(100, llm.n_vocab() - 100, depth + n_gen).tolist()
llm.reset(); llm.eval(ids[:depth])
t0 = time.perf_counter()
for t in ids[depth:]: llm.eval([t])
print(json.dumps(dict(decode=n_gen / (time.perf_counter() - t0), version=llama_cpp.__version__)))
"""

def run_reference(refpy, code: str, *args) -> str:
    "The last line `code` prints, run by llama.cpp's interpreter in an empty directory; exits with its error if it fails."
    with tempfile.TemporaryDirectory() as empty:      # `-c` puts the cwd on sys.path: keep stray modules out
        r = subprocess.run([refpy, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=empty)
    if r.returncode: sys.exit(f"llama.cpp side failed:\n{r.stderr[-2000:]}")
    return r.stdout.strip().splitlines()[-1]

def measure_depth(path, depth, a):
    "Decode tokens/s of both sides after `depth` tokens, alternating for `a.rounds` rounds; the best of each counts."
    ours = ref = 0.0; version = None
    for _ in range(a.rounds):
        cmd = [str(ROOT / ".venv" / "bin" / "llmbook"), "bench", "--model", str(path), "--threads", str(a.threads),
               "--ctx", str(depth + 192), "--depth", str(depth), "--prompt-tokens", "16", "--gen-tokens", str(a.gen_tokens),
               "--repeat", "1", "--json"]
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
        ours, kernels = max(ours, r["decode"]), r["kernels"]
        r = json.loads(run_reference(a.refpy, LLAMA_CPP_DEPTH, path, depth, a.gen_tokens, a.threads))
        ref, version = max(ref, r["decode"]), r["version"]
    return dict(name=f"SmolLM2-135M-Instruct Q4_1, a decode step after {depth:,} tokens", kernels=kernels, depth=depth,
                llmbook=dict(prefill=None, decode=round(ours, 1)), llama_cpp=dict(prefill=None, decode=round(ref, 1))), version

EXTRA_MODELS = [("SmolLM2-135M-Instruct F16", "smollm2-f16.gguf"), ("SmolLM2-135M-Instruct BF16", "smollm2-bf16.gguf"),
                ("Llama-3.2-1B-shaped F16 (random weights)", "llama1b-f16.gguf"),
                ("gpt-oss-20b-shaped, 4 of 24 layers, MXFP4 experts, F16 attention (random weights)", "gptoss-4l-f16attn.gguf")]

def llmbook_side(path, a):
    cmd = [str(ROOT / ".venv" / "bin" / "llmbook"), "bench", "--model", str(path), "--threads", str(a.threads),
           "--prompt-tokens", str(a.prompt_tokens), "--gen-tokens", str(a.gen_tokens), "--repeat", str(a.repeat), "--json"]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])

def llama_cpp_side(path, a):
    return json.loads(run_reference(a.refpy, LLAMA_CPP, path, a.prompt_tokens, a.gen_tokens, a.repeat, a.threads))

def measure(name, path, a):
    "Both sides on one file, alternating for `a.rounds` rounds; the best of each side counts."
    ours, ref = {}, {}
    for _ in range(a.rounds):          # alternate the two sides: a burst of load elsewhere hits both alike
        for best, side in ((ours, llmbook_side), (ref, llama_cpp_side)):
            r = side(path, a)
            for k in ("prefill", "decode"): best[k] = max(best.get(k, 0.0), r[k])
            for k in ("kernels", "version"):
                if k in r: best[k] = r[k]
    return dict(name=name, kernels=ours["kernels"], llmbook=dict(prefill=round(ours["prefill"], 1), decode=round(ours["decode"], 1)),
                llama_cpp=dict(prefill=round(ref["prefill"], 1), decode=round(ref["decode"], 1))), ref.get("version")

def reference_build(refpy) -> list:
    "What llama.cpp's CPU backend was compiled with, as it prints it: instruction sets and options (`AVX2 = 1 | ...`)."
    info = run_reference(refpy, "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())")
    parts = info.split(":", 1)[-1].split("|")                # "CPU : SSE3 = 1 | ... | AVX2 = 1 | ..."
    return [p.split("=")[0].strip() for p in parts if p.strip().endswith("= 1")]

def check_same_class(build: list):
    """Refuse to set llmbook's AVX2 code against an AVX-512 build of llama.cpp, or the other way round. pip installs
    the wheel it built first for a version whatever CMAKE_ARGS say, so a second build can silently be the first."""
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "from llmbook.floats import LANES; print(LANES)"],
                       capture_output=True, text=True, check=True)      # in this environment: NUMBA_CPU_NAME counts
    ours, theirs = int(r.stdout.split()[-1]) == 16, any(s.startswith("AVX512") for s in build)
    if ours != theirs:
        sys.exit(f"llmbook runs {'AVX-512' if ours else 'AVX2'} code here but llama.cpp ({' '.join(build)}) was built "
                 f"{'without' if ours else 'with'} AVX-512: build the reference for the same class "
                 "(pip install --no-cache-dir, see DEVELOPERS.md)")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs per process (best counts)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per side, alternating (best counts)")
    ap.add_argument("--refpy", default=os.environ.get("REFPY", "/work/refvenv/bin/python"))
    ap.add_argument("--llama1b", default="/work/models/llama1b-q4_k_m.gguf", help="bench/make_llama1b.py's file (skipped if absent)")
    ap.add_argument("--models-dir", default="/work/models", help="where the float-weight and gpt-oss files are (each skipped if absent)")
    ap.add_argument("--depth", type=int, default=None, metavar="N",
                    help="only measure SmolLM2's decode after N tokens in the context, and keep the others' rows")
    ap.add_argument("--only", default=None, metavar="NAMES",
                    help="measure only the rows whose names contain one of these (comma-separated), keep the others' rows")
    ap.add_argument("--write", nargs="?", const=str(SPEED_JSON), default=None, metavar="PATH",
                    help=f"write the measurements as JSON (default PATH: {SPEED_JSON.relative_to(ROOT)}, the index's table)")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"load average before: {load:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    build = reference_build(a.refpy); check_same_class(build)
    print(f"llama.cpp built for: {' '.join(build)}", file=sys.stderr)
    if a.depth is not None:                       # one row, put into the table as it stands
        row, version = measure_depth(smollm2_file(), a.depth, a)
        print(f"| {row['name']} | {a.threads} | {row['kernels']} | | | {row['llmbook']['decode']:.1f} | {row['llama_cpp']['decode']:.1f} |")
        if a.write:
            out = json.loads(Path(a.write).read_text(encoding="utf-8"))
            out["depth"] = row
            Path(a.write).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"wrote {a.write}: now python tools/execute_nbs.py index && python tools/docs_html.py --readme", file=sys.stderr)
        return
    models = [("SmolLM2-135M-Instruct Q4_1", smollm2_file()), ("Gemma 3 270M Q4_K_M", gemma3_file())]
    if Path(a.llama1b).is_file(): models.append(("Llama-3.2-1B-shaped Q4_K_M (random weights)", Path(a.llama1b)))
    models += [(name, Path(a.models_dir) / f) for name, f in EXTRA_MODELS if (Path(a.models_dir) / f).is_file()]
    if a.only: models = [(name, path) for name, path in models if any(part in name for part in a.only.split(","))]
    rows, version = [], None
    for name, path in models:
        if path is None: print(f"| {name} | {a.threads} | (model not installed) ||||||"); continue
        row, version = measure(name, path, a)
        rows.append(row)
        print(f"| {name} | {a.threads} | {row['kernels']} | {row['llmbook']['prefill']:.0f} | {row['llama_cpp']['prefill']:.0f} | "
              f"{row['llmbook']['decode']:.1f} | {row['llama_cpp']['decode']:.1f} |", flush=True)
    if a.write:
        cpu = cpu_info()
        out = dict(cpu=dict(model=cpu["model"], isa=cpu["isa"], cpus=cpu["cpus"], machine=cpu["machine"]),
                   threads=a.threads, llama_cpp_python=version, llama_cpp_build=build,
                   date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                   method=dict(prompt_tokens=a.prompt_tokens, gen_tokens=a.gen_tokens, repeat=a.repeat, rounds=a.rounds,
                               load_average_before=round(load, 1)),
                   models=rows)
        old = json.loads(Path(a.write).read_text(encoding="utf-8")) if Path(a.write).is_file() else {}
        if "depth" in old: out["depth"] = old["depth"]                # the row of --depth, measured on its own
        if a.only:                                   # the rows measured now in place of theirs, the others kept
            fresh = {r["name"]: r for r in rows}
            out["models"] = [fresh.pop(r["name"], r) for r in old.get("models", [])] + list(fresh.values())
        Path(a.write).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {a.write}: now python tools/execute_nbs.py index && python tools/docs_html.py --readme", file=sys.stderr)

if __name__ == "__main__":
    main()
