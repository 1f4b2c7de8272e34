"""Run every chapter top to bottom on a fresh kernel and save its outputs in the notebook, so the
rendered pages (and GitHub's view of nbs/) show what each cell printed and drew.

    python tools/execute_nbs.py                    # every nbs/*.ipynb
    python tools/execute_nbs.py 1_01_tensors 1_05_attention
    python tools/execute_nbs.py --timeout 1800     # seconds allowed per cell (default 1200)
    python tools/execute_nbs.py --out /tmp/x 1_01_tensors   # run copies in /tmp/x, leave nbs/ alone

Slow cells (`#| slow`: real models, benchmarks) run too: the saved outputs are the real ones. Each
notebook runs with the working directory `nbs/`, as `nbdev_test` does; widget state is stored so the
demo's widgets render as saved. Afterwards `nbdev_clean` strips the metadata nbdev does not keep.
A notebook that fails is left as it was, the error is printed, and the exit status is 1.

Each code cell's metadata records the hash of the source it ran (`"llmbook": {"source_sha": ...}`, see
`source_sha`); the notebook's first cell records the CPU the run was made on (`"llmbook": {"run_on": ...}`)
and one hash of all its code in order (`code_sha`: catches a deleted or moved cell). A markdown cell under the
title names that machine on the page itself (`run_note`), so every timing a reader sees says where it was made. settings.ini's
`allowed_cell_metadata_keys = llmbook` makes nbdev_clean keep them. tests/test_docs.py's
test_saved_outputs_match_their_source fails when a cell's source no longer has the hash it was run with:
its saved outputs (and those of the cells after it) may be stale.
"""
import argparse, hashlib, os, platform, shutil, subprocess, sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
META = "llmbook"    # the one cell-metadata key of ours (settings.ini: allowed_cell_metadata_keys)

def source_sha(source) -> str:
    "The first 16 hex digits of the sha256 of a cell's source (a string, or the list of lines a notebook file stores)."
    if isinstance(source, list): source = "".join(source)
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]

# Instruction sets that decide which kernels run and how fast (chapter 13's kernel_set), in /proc/cpuinfo's names
_ISA = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512vbmi",
        "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "i8mm", "sve"]

def cpu_info() -> dict:
    "The CPU this process runs on: model name, number of CPUs it may use, and the instruction sets of `_ISA` it has."
    model, flags = None, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "model name" and model is None: model = v.strip()
            if k.strip() in ("flags", "Features") and not flags: flags = set(v.split())
    except OSError: pass
    model = model or platform.processor() or platform.machine()
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"model": model, "cpus": ncpu, "machine": platform.machine(), "isa": [f for f in _ISA if f in flags]}

def notebooks(names):
    "The notebooks named (stems, file names or paths), or all of nbs/ in reading order."
    if not names: return sorted(NBS.glob("*.ipynb"))
    found = []
    for n in names:
        p = NBS / f"{Path(n).stem}.ipynb"
        if not p.exists(): sys.exit(f"no notebook {p}")
        found.append(p)
    return found

def code_sha(nb) -> str:
    "One hash of all the notebook's code, in order: it changes when a code cell is deleted or moved."
    return source_sha("\n".join(source_sha(c.source) for c in nb.cells if c.cell_type == "code" and c.source.strip()))

def stamp(nb, cpu=None):
    "Record in `nb` each code cell's source hash and, in the first cell, the CPU of the run and `code_sha`."
    for c in nb.cells:
        if c.cell_type == "code": c.metadata.setdefault(META, {})["source_sha"] = source_sha(c.source)
    if nb.cells: nb.cells[0].metadata.setdefault(META, {}).update(run_on=cpu or cpu_info(), code_sha=code_sha(nb))

def run_note(cpu: dict) -> str:
    "The line each executed page shows under its title: the machine its outputs (and every timing on it) come from."
    isa = ", ".join(f for f in cpu["isa"] if f.startswith(("avx", "amx", "asimd", "sve", "i8mm"))) or "no SIMD flags read"
    return (f"*Every output on this page, timings included, was made on one machine: {cpu['model']} ({isa}), "
            f"{cpu['cpus']} CPUs, on {time.strftime('%Y-%m-%d')}.*")

def note_machine(nb, cpu=None):
    "Put (or refresh) `run_note` in a markdown cell right after the title cell; the cell is marked in its metadata."
    text = run_note(cpu or cpu_info())
    for c in nb.cells:
        if c.cell_type == "markdown" and c.metadata.get(META, {}).get("run_note"):
            c.source = text; return
    at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    cell = nbformat.v4.new_markdown_cell(text, metadata={META: {"run_note": True}})
    nb.cells.insert(at, cell)

def clear_notebook_numba_cache():
    """Drop the machine code numba keeps for functions a notebook defines (`cache=True` in a cell). Its key is the
    cell's own source, so a kernel whose intrinsic changed in another cell would load stale code and print stale
    timings: every run compiles the chapter's kernels afresh (the package's own cache is not touched)."""
    from IPython.paths import get_ipython_cache_dir
    shutil.rmtree(Path(get_ipython_cache_dir()) / "numba_cache", ignore_errors=True)

def execute(path, timeout, cwd=NBS):
    """Execute the notebook at `path` in place on a fresh kernel (working directory `cwd`) and a fresh cache of its
    compiled cells; return the seconds it took. Raises on a failing cell."""
    clear_notebook_numba_cache()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(cwd)}})
    t0 = time.perf_counter()
    client.execute()
    note_machine(nb)
    stamp(nb)
    nbformat.write(nb, path)
    # nbdev_clean with the project's settings: keeps outputs and our `llmbook` cell metadata, drops execution counts
    # and kernel metadata
    subprocess.run([str(Path(sys.executable).parent / "nbdev_clean"), "--fname", str(path)], check=True, cwd=ROOT)
    return time.perf_counter() - t0

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="notebook stems (default: all of nbs/)")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    ap.add_argument("--out", type=Path, help="run copies in this directory instead of nbs/ (nbs/ is left as it is; "
                    "the working directory is still nbs/)")
    args = ap.parse_args(argv)
    failed = []
    if args.out: args.out.mkdir(parents=True, exist_ok=True)
    for p in notebooks(args.names):
        if args.out: p = Path(shutil.copy(p, args.out / p.name))
        print(f"{p.name:28s}", end=" ", flush=True)
        try: print(f"{execute(p, args.timeout):7.1f} s", flush=True)
        except CellExecutionError as e:
            failed.append(p.name); print("FAILED\n" + str(e)[-3000:], flush=True)
    if failed: print("failed:", " ".join(failed)); return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
