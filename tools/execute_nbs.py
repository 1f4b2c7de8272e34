"""Run every chapter top to bottom on a fresh kernel and save its outputs in the notebook, so the
rendered pages (and GitHub's view of nbs/) show what each cell printed and drew.

    python tools/execute_nbs.py                    # every nbs/*.ipynb
    python tools/execute_nbs.py 00_tensors 04_attention
    python tools/execute_nbs.py --timeout 1800     # seconds allowed per cell (default 1200)

Slow cells (`#| slow`: real models, benchmarks) run too: the saved outputs are the real ones. Each
notebook runs with the working directory `nbs/`, as `nbdev_test` does; widget state is stored so the
demo's widgets render as saved. Afterwards `nbdev_clean` strips the metadata nbdev does not keep.
A notebook that fails is left as it was, the error is printed, and the exit status is 1.
"""
import argparse, subprocess, sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"

def notebooks(names):
    "The notebooks named (stems, file names or paths), or all of nbs/ in reading order."
    if not names: return sorted(NBS.glob("*.ipynb"))
    found = []
    for n in names:
        p = NBS / f"{Path(n).stem}.ipynb"
        if not p.exists(): sys.exit(f"no notebook {p}")
        found.append(p)
    return found

def execute(path, timeout):
    "Execute `path` in place on a fresh kernel; return the seconds it took. Raises on a failing cell."
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(NBS)}})
    t0 = time.perf_counter()
    client.execute()
    nbformat.write(nb, path)
    # nbdev_clean with the project's settings: keeps outputs, drops execution counts and kernel metadata
    subprocess.run([str(Path(sys.executable).parent / "nbdev_clean"), "--fname", str(path)], check=True, cwd=ROOT)
    return time.perf_counter() - t0

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="notebook stems (default: all of nbs/)")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    args = ap.parse_args(argv)
    failed = []
    for p in notebooks(args.names):
        print(f"{p.name:28s}", end=" ", flush=True)
        try: print(f"{execute(p, args.timeout):7.1f} s", flush=True)
        except CellExecutionError as e:
            failed.append(p.name); print("FAILED\n" + str(e)[-3000:], flush=True)
    if failed: print("failed:", " ".join(failed)); return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
