"""The book as a site: every notebook renders to HTML through nbdev's doc processing (tools/docs_html.py),
and each page has its title, its prose, its saved outputs and the documentation of what its module exports;
README.md is what nbs/index.ipynb says; a headless Chromium screenshot of two pages is taken for a person
to look at (tests/artifacts/screenshots/).

The render takes a few minutes (nbdev executes each notebook's import, export and show_doc cells)."""
import ast, html, importlib, inspect, re, shutil, subprocess, sys
from pathlib import Path
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
OUT = ROOT / "tests" / "artifacts" / "docs_html"
NOTEBOOKS = sorted(p.stem for p in NBS.glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import docs_html  # noqa: E402

@pytest.fixture(scope="module")
def rendered():
    "Render every page once; the failures (stem -> message) come back with the output directory."
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_html.py"), "--out", str(OUT)],
                       capture_output=True, text=True, timeout=1800)
    return r

def text_of(page: Path) -> str:
    "The page's visible text, tags dropped and entities decoded, whitespace collapsed."
    s = page.read_text(encoding="utf-8")
    s = re.sub(r"<(script|style)\b.*?</\1>", " ", s, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", s)))

def words(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()

def prose_snippets(nb, n=3):
    "A few plain sentences of the notebook's prose (no markup that HTML would change)."
    out = []
    for c in nb.cells:
        if c.cell_type != "markdown": continue
        for para in c.source.split("\n\n"):
            line = words(para)
            if line.startswith(("#", ">", "|", "*", "-", "```", "<", "$")) or re.match(r"\d+\. ", line) or len(line) < 60:
                continue
            m = re.match(r"[A-Za-z ,;:'()0-9.-]{40,}", line)          # a stretch without markdown syntax
            if m: out.append(m.group(0).strip())
        if len(out) >= n: break
    return out[:n]

def saved_text_outputs(nb):
    "First lines of the text printed by visible cells (not hidden, not show_doc), as saved in the notebook."
    lines, richer = [], ("text/html", "text/markdown", "image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json")
    for c in nb.cells:
        if c.cell_type != "code" or re.match(r"#\|\s*(hide|export)", c.source) or "show_doc(" in c.source: continue
        for o in c.get("outputs", []):
            if any(k in o.get("data", {}) for k in richer): continue      # the page shows that form, not the text
            t = o.get("text") if o.output_type == "stream" else o.get("data", {}).get("text/plain")
            if isinstance(t, list): t = "".join(t)
            first = words((t or "").strip().splitlines()[0]) if (t or "").strip() else ""
            if len(first) >= 8 and not first.startswith("<"): lines.append(first)
    return lines

def image_outputs(nb):
    return sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {}))

def test_every_page_renders_without_errors(rendered):
    assert rendered.returncode == 0, f"docs build failed:\n{rendered.stdout[-2000:]}\n{rendered.stderr[-6000:]}"
    missing = [s for s in NOTEBOOKS if not (OUT / f"{s}.html").exists()]
    assert not missing, f"no page for {missing}"

@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_page_has_title_prose_and_outputs(rendered, stem):
    page = OUT / f"{stem}.html"
    if not page.exists(): pytest.fail(f"{stem}.html was not rendered:\n{rendered.stderr[-3000:]}")
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    body, text = page.read_text(encoding="utf-8"), text_of(page)
    title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
    title_text = words(re.sub(r"[`*]", "", title))
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", body, re.S)
    assert h1 and title_text in words(html.unescape(re.sub(r"<[^>]+>", "", h1.group(1)))), f"{stem}: title {title!r}"
    assert f"<title>{title}</title>" in body or f"<title>{html.escape(title)}</title>" in body, f"{stem}: <title>"
    for s in prose_snippets(nb):
        assert s in text, f"{stem}: prose {s!r} is not on the page"
    for line in saved_text_outputs(nb):
        assert line in text, f"{stem}: output {line!r} is not on the page"
    assert body.count("<img") >= image_outputs(nb), f"{stem}: figures missing"

@pytest.mark.parametrize("stem", [s for s in NOTEBOOKS if s != "index"])
def test_exported_api_is_documented(rendered, stem):
    """Every function and class a chapter exports (in its module's __all__) has a show_doc section on its page. A page
    may export cells into an earlier chapter's module (`#| exports gguf`: chapter 17 writes chapter 02's GGUFWriter):
    the names are those defined on the page."""
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    m = re.search(r"#\|\s*default_exp\s+(\S+)", "\n".join(code))
    if not m: pytest.skip(f"{stem} exports no module")
    page = OUT / f"{stem}.html"
    if not page.exists(): pytest.fail(f"{stem}.html was not rendered")
    exported = [s for s in code if re.search(r"^#\|\s*exports?\b", s, re.M)]
    targets = {m.group(1)} | {t for s in exported for t in re.findall(r"^#\|[ \t]*exports?[ \t]+(\w+)", s, re.M)}
    defined = {n.name for s in exported for n in ast.parse(s).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
               and not any("patch" in ast.unparse(d) for d in n.decorator_list)}
    body = page.read_text(encoding="utf-8")
    names = []
    for t in sorted(targets):
        mod = importlib.import_module(f"llmbook.{t}")
        names += [n for n in getattr(mod, "__all__", []) if n in defined and not n.startswith("_")
                  and (inspect.isfunction(o := getattr(mod, n)) or inspect.isclass(o)) and getattr(o, "__module__", "") == mod.__name__]
    undocumented = [n for n in names if f'id="{n}"' not in body]
    assert not undocumented, f"{stem}: no show_doc for {undocumented}"

def test_every_chapter_has_its_outputs_saved():
    "The pages show saved outputs: a chapter whose cells print or draw must have been executed (tools/execute_nbs.py)."
    unexecuted = []
    for stem in NOTEBOOKS:
        nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code" and not re.match(r"#\|\s*(hide|export|slow)", c.source)
                and not re.match(r"(@.*\n)*(def|class) ", c.source)              # a definition prints only when called
                and re.search(r"\bprint\(|plt\.|show_doc\(", c.source)]
        if code and not any(c.get("outputs") for c in code): unexecuted.append(stem)
    assert not unexecuted, f"no saved outputs in {unexecuted}: run python tools/execute_nbs.py {' '.join(unexecuted)}"

def test_no_saved_output_is_an_error_nobody_meant():
    "No page shows a traceback a cell did not ask for: an error output, or Python's 'Exception ignored' on stderr."
    found = []
    for stem in NOTEBOOKS:
        nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
        for i, c in enumerate(nb.cells):
            for o in c.get("outputs", []) if c.cell_type == "code" else []:
                text = o.get("text", "") if o.output_type == "stream" else ""
                if o.output_type == "error" or "Exception ignored" in text or "Traceback (most recent call last)" in text:
                    found.append(f"{stem} cell {i}: {(o.get('ename') or text.strip().splitlines()[0])[:100]}")
    assert not found, found

def test_readme_is_what_index_says():
    want = docs_html.readme_markdown()
    have = (ROOT / "README.md").read_text(encoding="utf-8")
    assert have == want, "README.md is out of date: run python tools/docs_html.py --readme"

def test_readme_has_quick_start_and_chapter_map():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash tools/setup.sh" in readme and "llmbook generate" in readme
    for stem in NOTEBOOKS:
        if stem != "index": assert f"(nbs/{stem}.ipynb)" in readme, f"README does not link chapter {stem}"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here")
@pytest.mark.parametrize("stem", ["index", "glossary", "1_05_attention"])
def test_screenshot(rendered, stem):
    "A headless browser draws the page: the screenshot is not blank (look at it: tests/artifacts/screenshots/)."
    page = OUT / f"{stem}.html"
    if not page.exists(): pytest.fail(f"{stem}.html was not rendered")
    shots = ROOT / "tests" / "artifacts" / "screenshots"; shots.mkdir(parents=True, exist_ok=True)
    png = shots / f"{stem}.png"; png.unlink(missing_ok=True)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                    f"--screenshot={png}", "--window-size=1280,2000", page.as_uri()],
                   capture_output=True, timeout=120)
    assert png.exists(), "chromium wrote no screenshot"
    import matplotlib.image as mpimg
    img = mpimg.imread(png)
    assert img.shape[:2] == (2000, 1280)
    assert img[..., :3].std() > 0.05, "the screenshot is (nearly) one colour"

CHAPTERS = [s for s in NOTEBOOKS if re.match(r"[1-4]_\d\d_", s)]      # part_chapter_name

@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_opens_with_what_it_builds_and_closes_with_what_comes_next(stem):
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    md = [c.source for c in without_run_note(nb.cells) if c.cell_type == "markdown"]
    first = md[0].splitlines()
    assert first[0].startswith("# ") and any(l.startswith("> ") for l in first), f"{stem}: no title and summary line"
    assert len(md) > 1 and len(md[1]) > 200, f"{stem}: no opening prose after the title"
    closing = [s for s in md if re.search(r"^## (What's next|Where to go from here)", s, re.M)]
    assert closing, f"{stem}: no closing section saying what the next chapter adds"
    last_exp = max((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source in closing))
    assert last_exp >= len(nb.cells) - 4, f"{stem}: the closing section is not at the end"

@pytest.mark.parametrize("stem", [s for s in CHAPTERS if s != "4_26_cli"])
def test_chapter_has_a_figure(stem):
    "Every chapter but the CLI's draws at least one picture (matplotlib), saved with the notebook's outputs."
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    assert any("plt." in c.source for c in nb.cells if c.cell_type == "code"), f"{stem}: no figure"
    assert image_outputs(nb) >= 1, f"{stem}: figures not saved: run python tools/execute_nbs.py {stem}"

def is_run_note(c) -> bool:
    "The line tools/execute_nbs.py puts under a page's title: the machine its outputs were made on."
    return c.cell_type == "markdown" and bool(c.metadata.get("llmbook", {}).get("run_note"))

def without_run_note(cells) -> list: return [c for c in cells if not is_run_note(c)]

@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_a_page_with_outputs_names_the_machine_they_come_from(stem):
    "Outputs (timings among them) are from one run on one machine, named once under the title (issue 23)."
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"): pytest.skip(f"{stem} has no outputs")
    notes = [c for c in nb.cells if is_run_note(c)]
    assert len(notes) == 1 and nb.cells.index(notes[0]) <= 1, f"{stem}: run python tools/execute_nbs.py {stem}"
    assert "made on one machine" in notes[0].source

# The map, the glossary and the exercises (issue 14): every chapter opens with its place on the map of a token's
# path (`tools/draw_map.py` draws nbs/images/map_<stem>.svg) and a link to the glossary, and closes with exercises.
OPENING_CELLS = 4          # the title, the first paragraph, the map and its sentence

@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_opens_with_its_place_on_the_map_and_the_glossary(stem):
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    opening = "\n".join(c.source for c in without_run_note(nb.cells)[:OPENING_CELLS] if c.cell_type == "markdown")
    assert f"](images/map_{stem}.svg)" in opening, \
        f"{stem}: no ![Where this chapter sits on the path of a token](images/map_{stem}.svg) in its first cells"
    assert (NBS / "images" / f"map_{stem}.svg").exists(), f"no nbs/images/map_{stem}.svg: add {stem} to tools/draw_map.py"
    assert "](glossary.ipynb" in opening, f"{stem}: no link to the glossary ([glossary](glossary.ipynb)) in its opening"

@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_has_exercises(stem):
    "2-4 exercises under '## Exercises', before the closing section."
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    heads = [(i, l) for i, c in enumerate(nb.cells) if c.cell_type == "markdown" for l in c.source.splitlines()
             if l.startswith("## ")]
    ex = [i for i, l in heads if l.strip() == "## Exercises"]
    assert ex, f"{stem}: no '## Exercises' section"
    closing = [i for i, l in heads if re.match(r"## (What's next|Where to go from here)", l)]
    assert not closing or ex[0] <= closing[-1], f"{stem}: the exercises come after the closing section"

def _image_links(nb):
    for c in nb.cells:
        if c.cell_type == "markdown":
            yield from re.findall(r"\]\((images/[^)\s]+\.(?:svg|png))", c.source)
            yield from re.findall(r"src=[\"'](images/[^\"']+\.(?:svg|png))", c.source)

@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_image_links_point_to_files(stem):
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    missing = [l for l in _image_links(nb) if not (NBS / l).is_file()]
    assert not missing, f"{stem}: links to images that do not exist: {missing} (python tools/draw_map.py draws the maps)"

def test_every_chapter_has_a_map_and_the_index_shows_the_whole_one():
    import draw_map
    assert set(CHAPTERS) <= set(draw_map.CHAPTERS), f"tools/draw_map.py has no map for {set(CHAPTERS) - set(draw_map.CHAPTERS)}"
    index = nbformat.read(NBS / "index.ipynb", as_version=4)
    assert "](images/map.svg)" in "\n".join(c.source for c in index.cells[:3]), "the index does not open with the map"

@pytest.mark.parametrize("stem", ["index", "glossary"])
def test_notebook_links_resolve(stem):
    "The index and the glossary link only to notebooks that exist."
    nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
    links = {m for c in nb.cells if c.cell_type == "markdown" for m in re.findall(r"\]\(([\w-]+)\.ipynb[#)]", c.source)}
    assert links, f"{stem} links no chapter"
    missing = sorted(l for l in links if not (NBS / f"{l}.ipynb").exists())
    assert not missing, f"{stem} links to notebooks that do not exist: {missing}"

def test_glossary_links_every_chapter():
    text = (NBS / "glossary.ipynb").read_text(encoding="utf-8")
    assert not [s for s in CHAPTERS if f"({s}.ipynb" not in text], "a chapter the glossary never links"

def test_math_renders_offline(rendered):
    "TeX in the prose becomes MathML when the page is built: no page loads MathJax, no formula is left as raw TeX."
    pages = 0
    for stem in NOTEBOOKS:
        page = OUT / f"{stem}.html"
        if not page.exists(): continue
        nb = nbformat.read(NBS / f"{stem}.ipynb", as_version=4)
        maths = {}
        for c in nb.cells:
            if c.cell_type == "markdown": docs_html.math_placeholders(c.source, maths)
        body = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]*mathjax", body, re.I), f"{stem}: the page loads MathJax"
        assert "LLMBOOKMATH" not in body, f"{stem}: a math placeholder was left in the page"
        assert body.count("<math") >= len(maths), f"{stem}: {len(maths)} formulas, {body.count('<math')} rendered"
        pages += bool(maths)
    assert pages >= 2, "no page with math was checked"

# Outputs that cannot go stale (issue 23). tools/execute_nbs.py records in each code cell's metadata the hash of the
# source it ran (`execute_nbs.source_sha`) and, in the first cell, one hash of all the code in order (`code_sha`);
# nbdev_clean keeps them (settings.ini: allowed_cell_metadata_keys = llmbook). A cell whose source no longer has its
# hash was edited after the run, and the saved outputs on the page may contradict the code above them.
# Every code cell is checked, not only those with outputs: a cell that printed nothing (`n = 64`, an exported
# function) feeds the cells after it, so editing it makes their saved outputs stale while their own source is
# unchanged; and a silent cell may print once edited. Cells added after the run have no hash and fail the same way,
# and `code_sha` catches a code cell deleted or moved. Only blank cells need no hash (they run nothing).
import execute_nbs  # noqa: E402

def stale_cells(nb) -> list[str]:
    "What in `nb` changed since its outputs were saved: the first line (after #| directives) of each stale code cell."
    meta = lambda c: c.metadata.get(execute_nbs.META, {})
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    if code and not any("source_sha" in meta(c) for c in code):
        return ["(no source hashes: executed before tools/execute_nbs.py recorded them)"]
    first = lambda c: next((l for l in c.source.splitlines() if l.strip() and not l.startswith("#|")), "#|")[:80]
    stale = [first(c) + ("" if "source_sha" in meta(c) else "   (added after the run)")
             for c in code if meta(c).get("source_sha") != execute_nbs.source_sha(c.source)]
    recorded = [meta(c)["code_sha"] for c in nb.cells if "code_sha" in meta(c)]
    if not stale and recorded != [execute_nbs.code_sha(nb)]:
        stale.append("(a code cell was deleted or moved)" if recorded else "(the run recorded no code_sha)")
    return stale

def stale_report(paths) -> str:
    "The notebooks among `paths` whose saved outputs may be stale, each with its stale cells and the command to fix it."
    bad = {Path(p).stem: s for p in paths if (s := stale_cells(nbformat.read(p, as_version=4)))}
    if not bad: return ""
    lines = [f"{stem}.ipynb:" + "".join(f"\n    {l}" for l in s) for stem, s in bad.items()]
    return "\n".join(lines) + f"\nre-run them: python tools/execute_nbs.py {' '.join(bad)}  (then commit the notebooks)"

# Skipped only while NO notebook carries hashes: the scheme is new, and no notebook has been re-executed with it yet.
# Once one has (the lead re-executes every chapter), the check is always on, and a tree in which some notebooks
# carry hashes and others do not fails, listing the ones still to run.
ANY_HASHED = any(execute_nbs.META in c.get("metadata", {}) for p in NBS.glob("*.ipynb")
                 for c in nbformat.read(p, as_version=4).cells)

@pytest.mark.skipif(not ANY_HASHED, reason="no notebook has been executed by tools/execute_nbs.py since it records "
                    "source hashes: run python tools/execute_nbs.py (every notebook) to turn this check on")
def test_saved_outputs_match_their_source():
    report = stale_report(sorted(NBS.glob("*.ipynb")))
    assert not report, "saved outputs may be stale (a code cell changed after the notebook was executed):\n" + report

# One truth across pages (issue 35): a figure with a unit in a page's prose (tok/s, GB/s, ms, MB, 1.5x ...) is one
# that page's own outputs print, so that re-executing the page on another machine cannot leave its prose behind.
# Quoted outside figures are allowed here, at most five, each with its source.
import book_stats  # noqa: E402
QUOTED_FIGURES = {
    # (page stem, figure as written): where it comes from
}

@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_prose_figures_are_printed_on_their_page(stem):
    assert len(QUOTED_FIGURES) <= 5
    missing = [f for f in book_stats.prose_figures_not_in_outputs(f"{stem}.ipynb") if (stem, f) not in QUOTED_FIGURES]
    assert not missing, (f"{stem}: figures in the prose that no output on the page prints: {missing} "
                         f"(print them from a cell, or say it without the number; python tools/book_stats.py --figures)")
