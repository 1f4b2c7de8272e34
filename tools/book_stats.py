"""What the book measures itself by (issue 35): per part and chapter, in the sidebar's reading order,

- code lines: non-blank lines of the displayed code cells, `#|` directive lines included (the issue's count; a
  cell marked `#| hide` is not displayed);
- cells over 40 lines: displayed code cells longer than a reader holds at once;
- the code lines a reader passes before the one-page engine (index included);
- prose figures not in outputs: numbers with a unit (tok/s, GB/s, ms, MB, 1.5x ...) in a page's prose that no
  output of that page prints.

    python tools/book_stats.py            # the table
    python tools/book_stats.py --figures  # also list each prose figure missing from its page's outputs

tests/test_docs.py uses `prose_figures_not_in_outputs`; tests/test_layout.py the line counts.
"""
import argparse, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
ONE_PAGE = "one_page"          # the one-page engine's notebook, after its part prefix
LONG_CELL = 40

# A figure: a number and a unit of speed, size, time or ratio. "1.5x" and "1.5×" are ratios; "2 x 3" is not.
UNIT = r"(?:tok/s|tokens/s|GB/s|MB/s|M/s|GiB|MiB|KiB|GB|MB|KB|kB|ms|µs|us|(?:x|×)(?!\s*\d))"
FIGURE = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)*)\s?" + UNIT + r"(?![\w/])")

def sidebar() -> list:
    "[(part title, [notebook file names])] in reading order; the index is its own part."
    import yaml
    side = yaml.safe_load((NBS / "sidebar.yml").read_text())["website"]["sidebar"]["contents"]
    parts = []
    for item in side:
        if isinstance(item, str): parts.append(("Index", [item]))
        else: parts.append((item["section"], list(item["contents"])))
    return parts

def cells(name: str) -> list:
    return json.loads((NBS / name).read_text())["cells"]

def source(c) -> str:
    return "".join(c["source"])

def displayed_code(name: str) -> list:
    "The sources of the code cells a reader sees on the page."
    return [source(c) for c in cells(name) if c["cell_type"] == "code" and source(c).strip()
            and not re.match(r"\s*#\|\s*hide\b", source(c))]

def code_lines(src: str) -> int:
    return sum(1 for l in src.splitlines() if l.strip())

def output_text(name: str) -> str:
    "Everything the page's code cells printed or returned as text."
    out = []
    for c in cells(name):
        for o in c.get("outputs", []) if c["cell_type"] == "code" else []:
            t = o.get("text") if o.get("output_type") == "stream" else o.get("data", {}).get("text/plain") or \
                o.get("data", {}).get("text/markdown") or o.get("data", {}).get("text/html")
            out.append("".join(t) if isinstance(t, list) else (t or ""))
    return "\n".join(out)

def prose(name: str) -> str:
    "The page's markdown, with code spans, links' targets and image paths dropped."
    text = "\n".join(source(c) for c in cells(name) if c["cell_type"] == "markdown")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)

def _number(text: str) -> str:
    "A figure's number as a key: no thousands separators, no trailing zeros after the point."
    n = text.replace(",", "")
    return n.rstrip("0").rstrip(".") if "." in n else n

def prose_figures_not_in_outputs(name: str) -> list:
    "The figures with a unit in the page's prose whose number no output of the page prints with a unit."
    printed = {_number(m.group(1)) for m in FIGURE.finditer(output_text(name))}
    return [m.group(0) for m in FIGURE.finditer(prose(name)) if _number(m.group(1)) not in printed]

def stats() -> list:
    "One row per notebook: part, name, code lines, cells over LONG_CELL lines, missing prose figures."
    rows = []
    for part, names in sidebar():
        for name in names:
            code = displayed_code(name)
            rows.append(dict(part=part, name=name, lines=sum(map(code_lines, code)),
                             long=sum(code_lines(s) > LONG_CELL for s in code),
                             missing=prose_figures_not_in_outputs(name)))
    return rows

def lines_before_one_page(rows) -> int:
    before = 0
    for r in rows:
        if ONE_PAGE in r["name"]: return before
        before += r["lines"]
    return before

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", action="store_true", help="list every prose figure missing from its page's outputs")
    args = ap.parse_args()
    rows = stats()
    print(f"{'chapter':34} {'code lines':>10} {'cells > 40':>10} {'figures not in outputs':>23}")
    for part in dict.fromkeys(r["part"] for r in rows):
        rs = [r for r in rows if r["part"] == part]
        print(f"{part}: {sum(r['lines'] for r in rs)} code lines, {sum(r['long'] for r in rs)} cells over {LONG_CELL}, "
              f"{sum(len(r['missing']) for r in rs)} figures not in outputs")
        for r in rs:
            print(f"  {r['name']:32} {r['lines']:>10} {r['long']:>10} {len(r['missing']):>23}")
            if args.figures and r["missing"]: print("      " + "; ".join(r["missing"]))
    print(f"code lines before the one-page engine (index included): {lines_before_one_page(rows)}")

if __name__ == "__main__":
    main()
