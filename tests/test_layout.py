"""The house follows the book (issue 23): one notebook, one module; modules import only modules of earlier chapters
(reading order = nbs/sidebar.yml), so the import graph has no circle and no upward arrow. Function-level imports
count too, apart from the few named below, each with its reason."""
import ast, json, re
from pathlib import Path
import yaml

ROOT = Path(__file__).resolve().parent.parent
NBS, PKG = ROOT / "nbs", ROOT / "llmbook"

# (importer, imported): allowed although `imported` comes later in reading order
LATER_ALLOWED = {
    ("gguf", "quants"): "GGUFFile.dequantize is defined where a reader looks for it (DESIGN.md) and imports chapter 03 when first called",
    ("cli", "serve"): "cli.py lists every command itself; serving is optional (FastAPI) and imported when `llmbook serve` runs",
}

def reading_order() -> list:
    "Module names in the order of the sidebar's notebooks (their `#| default_exp`)."
    def walk(items):
        for it in items:
            if isinstance(it, str): yield it
            else: yield from walk(it.get("contents", []))
    side = yaml.safe_load((NBS / "sidebar.yml").read_text())["website"]["sidebar"]["contents"]
    order = []
    for name in walk(side):
        nb = json.loads((NBS / name).read_text())
        for c in nb["cells"]:
            m = re.search(r"^#\|\s*default_exp\s+(\S+)", "".join(c["source"]), re.M)
            if m: order.append(m[1]); break
    return order

def llmbook_imports(module: str) -> set:
    "The llmbook modules `module` imports, at the top or inside functions."
    tree, out = ast.parse((PKG / f"{module}.py").read_text()), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1: out.add(mod.split(".")[0] if mod else None)
            elif mod.startswith("llmbook."): out.add(mod.split(".")[1])
            if (node.level == 1 and not mod) or mod == "llmbook":
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("llmbook."))
    return {m for m in out if m and (PKG / f"{m}.py").exists()}

def test_every_module_has_its_notebook_in_the_sidebar():
    order = reading_order()
    modules = {p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(order), f"modules without a chapter: {modules - set(order)}; chapters without a module: {set(order) - modules}"
    assert len(order) == len(set(order)), "two notebooks export the same module"

def test_imports_follow_reading_order():
    order = reading_order()
    rank = {m: i for i, m in enumerate(order)}
    upward = [(m, i) for m in order for i in llmbook_imports(m)
              if rank[i] >= rank[m] and (m, i) not in LATER_ALLOWED]
    assert not upward, f"modules importing a later chapter's module: {upward}"

def test_part_one_uses_no_compiler_intrinsics():
    "Part I is readable: no llvmlite, no numba intrinsics, nothing of Part II."
    side = (NBS / "sidebar.yml").read_text()
    part1 = [l.strip()[2:] for l in side.splitlines() if l.strip().startswith("- 1_")]
    assert len(part1) >= 10
    for name in part1:
        text = "".join("".join(c["source"]) for c in json.loads((NBS / name).read_text())["cells"] if c["cell_type"] == "code")
        for word in ("llvmlite", "@intrinsic", "llmbook.int8", "llmbook.packed", "llmbook.engine", "llmbook.runtime",
                     "llmbook.attention_kernels", "KernelEngine", "llmbook.load"):
            assert word not in text, f"{name} (Part I) uses {word}"

# The spine fits in one head (issue 35): counted by tools/book_stats.py over the code cells a reader sees, `#|`
# directive lines included (the count): 5,647 lines when the issue was filed, 3,489 at the end of session 16.
# Part I at most 3,500 lines, no cell over 40, the one-page engine within the first 1,000.
import sys  # noqa: E402
sys.path.insert(0, str(ROOT / "tools"))
import book_stats  # noqa: E402
PART_ONE_LINES, ONE_PAGE_WITHIN, LONG_CELL = 3500, 1000, 40

def test_part_one_fits_in_one_head():
    rows = book_stats.stats()
    part1 = [r for r in rows if r["part"].startswith("Part I ")]
    assert sum(r["lines"] for r in part1) <= PART_ONE_LINES, \
        {r["name"]: r["lines"] for r in part1} | {"total": sum(r["lines"] for r in part1)}
    assert not [r["name"] for r in part1 if r["long"]], f"Part I code cells over {LONG_CELL} lines"
    assert book_stats.lines_before_one_page(rows) <= ONE_PAGE_WITHIN
