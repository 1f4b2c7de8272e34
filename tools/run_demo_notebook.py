"""Execute nbs/11_demo.ipynb in place with its widgets' state saved, so that the rendered docs show a snapshot of
the app (nbdev_clean keeps the notebook's `widgets` metadata and the cell outputs).

Run it after every change to the chapter, before committing:
    .venv/bin/python tools/run_demo_notebook.py && .venv/bin/nbdev_clean --fname nbs/11_demo.ipynb
It runs every cell, the `#| slow` ones too (they load the default model, SmolLM2)."""
import sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]

def main(path=ROOT / "nbs" / "11_demo.ipynb"):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    n = len(nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {}))
    if n == 0: sys.exit(f"{path}: no widget state was saved")
    nbformat.write(nb, path)
    print(f"{path.name}: executed, {n} widget models saved")

if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:]))
