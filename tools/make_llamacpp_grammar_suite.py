"""Extract the cases of llama.cpp's grammar test suite, `tests/test-grammar-integration.cpp`, into
`tests/fixtures/grammar_llamacpp_suite.json`, so that `tests/test_grammar_suite.py` runs llama.cpp's own cases
through `llmbook.grammar`.

    python tools/make_llamacpp_grammar_suite.py PATH              # PATH: the .cpp file, or a llama.cpp source tree
    python tools/make_llamacpp_grammar_suite.py PATH --out FILE

Get the source from a llama.cpp checkout, or from llama-cpp-python's sdist (DEVELOPERS.md:
`pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36`, untar, `vendor/llama.cpp`). The .cpp file is
not committed; the fixture is.

What is extracted (each string exactly as the C++ compiler would see it):
- `test_grammar(desc, grammar, passing, failing)` and `test_schema(desc, schema, passing, failing)`: a case
  with its grammar (or JSON Schema text) and the strings llama.cpp must match and must not. A string built with
  `token(N)` (llama.cpp's token syntax) is kept with `<[N]>` in its place and `"tokens": true`.
- in the `test_failure_*` functions, every grammar passed to `test_build_grammar_fails`, to a parser's `.parse`,
  or to `build_grammar_with_root(g, "name")` followed by `== nullptr`: a grammar llama.cpp rejects (with its
  start rule); `build_grammar_with_root` followed by `!= nullptr` is a grammar it accepts.
The script reads C++ with a small tokenizer (comments, string literals with escapes, raw strings, `+`), not a
compiler: a construct it does not know stops it with the line number, rather than dropping a case.
"""
import argparse, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "grammar_llamacpp_suite.json"
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "?": "?", "a": "\a", "b": "\b",
           "f": "\f", "v": "\v", "0": "\0"}

def tokens(src: str):
    "C++ source -> [(kind, value, line)]: kind 'str' (decoded literal), 'id', 'num' or 'op'; comments dropped."
    out, i, n = [], 0, len(src)
    line = lambda: src.count("\n", 0, i) + 1
    while i < n:
        c = src[i]
        if c.isspace(): i += 1
        elif src.startswith("//", i): i = src.find("\n", i) if "\n" in src[i:] else n
        elif src.startswith("/*", i): i = src.index("*/", i) + 2
        elif c == "R" and i + 1 < n and src[i + 1] == '"':             # raw string R"delim( ... )delim"
            open_ = src.index("(", i)
            delim = src[i + 2:open_]
            close = src.index(")" + delim + '"', open_)
            out.append(("str", src[open_ + 1:close], line())); i = close + len(delim) + 2
        elif c == '"':
            j, s = i + 1, []
            while src[j] != '"':
                if src[j] == "\\":
                    e = src[j + 1]
                    if e == "x":
                        m = re.match(r"[0-9a-fA-F]+", src[j + 2:]); s.append(chr(int(m.group(), 16))); j += 2 + len(m.group())
                    elif e in "uU":
                        k = 4 if e == "u" else 8; s.append(chr(int(src[j + 2:j + 2 + k], 16))); j += 2 + k
                    elif e in _SIMPLE and not (e == "0" and src[j + 2].isdigit()): s.append(_SIMPLE[e]); j += 2
                    else: raise SystemExit(f"line {line()}: escape \\{e} not handled")
                else: s.append(src[j]); j += 1
            out.append(("str", "".join(s), line())); i = j + 1
        elif c == "'":                                                 # a char literal: kept as text
            j = src.index("'", i + 2 if src[i + 1] == "\\" else i + 1); out.append(("op", src[i:j + 1], line())); i = j + 1
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_0-9]+", src[i:]); out.append(("id", m.group(), line())); i += len(m.group())
        elif c.isdigit():
            m = re.match(r"[0-9A-Za-z_.]+", src[i:]); out.append(("num", m.group(), line())); i += len(m.group())
        else:
            op = src[i:i + 2] if src[i:i + 2] in ("::", "->", "==", "!=", "&&", "||", "<=", ">=") else c
            out.append(("op", op, line())); i += len(op)
    return out

def split_args(toks, start):
    "The arguments of the call whose '(' is toks[start]: (list of token lists, index after the ')')."
    args, cur, depth, i = [], [], 0, start + 1
    while True:
        k, v, _ = toks[i]
        if k == "op" and v in "([{": depth += 1
        if k == "op" and v in ")]}":
            if depth == 0:
                if cur: args.append(cur)
                return args, i + 1
            depth -= 1
        if k == "op" and v == "," and depth == 0: args.append(cur); cur = []
        else: cur.append(toks[i])
        i += 1

def string_expr(expr):
    "A string expression (literals, `token(N)`, `+`): (text with <[N]> for tokens, uses tokens?)."
    out, uses, i = [], False, 0
    while i < len(expr):
        k, v, ln = expr[i]
        if k == "str": out.append(v); i += 1
        elif k == "op" and v == "+": i += 1
        elif k == "id" and v == "token" and expr[i + 1][1] == "(" and expr[i + 2][0] == "num" and expr[i + 3][1] == ")":
            out.append(f"<[{int(expr[i + 2][1])}]>"); uses = True; i += 4
        else: raise SystemExit(f"line {ln}: cannot read {v!r} in a string expression")
    return "".join(out), uses

def string_list(expr):
    "A `{ s1, s2, ... }` list -> [(text, uses tokens?)]."
    if not expr or expr[0][1] != "{" or expr[-1][1] != "}": raise SystemExit(f"line {expr[0][2]}: expecting a {{...}} list")
    items, cur, depth = [], [], 0
    for t in expr[1:-1]:
        if t[0] == "op" and t[1] in "([{": depth += 1
        if t[0] == "op" and t[1] in ")]}": depth -= 1
        if t[0] == "op" and t[1] == "," and depth == 0:
            if cur: items.append(string_expr(cur))
            cur = []
        else: cur.append(t)
    if cur: items.append(string_expr(cur))
    return items

def functions(toks):
    "(name, start, end) of each top-level `static void name(...) { ... }` body, by token index."
    out, i = [], 0
    while i < len(toks) - 3:
        if toks[i][1] == "void" and toks[i + 1][0] == "id" and toks[i + 2][1] == "(":
            _, j = split_args(toks, i + 2)
            if toks[j][1] == "{":
                depth, k = 0, j
                while True:
                    if toks[k][1] == "{": depth += 1
                    elif toks[k][1] == "}":
                        depth -= 1
                        if depth == 0: break
                    k += 1
                out.append((toks[i + 1][1], j, k)); i = k
        i += 1
    return out

def extract(src: str) -> dict:
    toks = tokens(src)
    cases, rejects = [], []
    for fname, lo, hi in functions(toks):
        if fname in ("test", "test_grammar", "test_schema", "match_string", "parse_tokens", "token", "build_grammar",
                     "build_grammar_with_root", "test_build_grammar_fails", "main"): continue
        consts = {}
        i = lo
        while i < hi:
            k, v, ln = toks[i]
            if k == "id" and v in ("test_grammar", "test_schema") and toks[i + 1][1] == "(":
                args, i = split_args(toks, i + 1)
                if len(args) == 3: args = [[("str", "", ln)]] + args          # an older file: no description
                if len(args) != 4: raise SystemExit(f"line {ln}: {v} with {len(args)} arguments")
                desc, _ = string_expr(args[0]); text, _ = string_expr(args[1])
                case = {"function": fname, "line": ln, "kind": "grammar" if v == "test_grammar" else "schema",
                        "description": desc, "text": text,
                        "passing": [{"text": s, "tokens": t} for s, t in string_list(args[2])],
                        "failing": [{"text": s, "tokens": t} for s, t in string_list(args[3])]}
                if v == "test_schema": json.loads(text)                       # the schema must be JSON
                cases.append(case); continue
            if k == "id" and v == "string" and toks[i + 1][0] == "id" and toks[i + 2][1] == "=":
                j = i + 3
                while toks[j][1] != ";": j += 1
                consts[toks[i + 1][1]] = string_expr(toks[i + 3:j])[0]; i = j; continue
            if fname.startswith("test_failure") or fname.startswith("test_custom_root"):
                if k == "id" and v == "test_build_grammar_fails":
                    name = toks[i + 2][1]
                    rejects.append({"function": fname, "line": ln, "grammar": consts[name], "root": "root", "accepted": False})
                elif k == "op" and v == "." and toks[i + 1][1] == "parse" and toks[i + 3][0] == "id":
                    rejects.append({"function": fname, "line": ln, "grammar": consts[toks[i + 3][1]], "root": "root",
                                    "accepted": False})
                elif k == "id" and v == "build_grammar_with_root":
                    args, j = split_args(toks, i + 1)
                    root = string_expr(args[1])[0]
                    var = toks[i - 2][1]                                       # X = build_grammar_with_root(...)
                    m = j
                    while not (toks[m][1] == var and toks[m + 1][1] in ("==", "!=")): m += 1
                    rejects.append({"function": fname, "line": ln, "grammar": consts[args[0][0][1]], "root": root,
                                    "accepted": toks[m + 1][1] == "!="})
                    i = j; continue
            i += 1
    return {"source": "llama.cpp tests/test-grammar-integration.cpp", "cases": cases, "build": rejects}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="test-grammar-integration.cpp, or a llama.cpp source tree")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    p = Path(a.path)
    if p.is_dir(): p = p / "tests" / "test-grammar-integration.cpp"
    data = extract(p.read_text(encoding="utf-8"))
    n_str = sum(len(c["passing"]) + len(c["failing"]) for c in data["cases"])
    n_tok = sum(s["tokens"] for c in data["cases"] for s in c["passing"] + c["failing"])
    Path(a.out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kinds = [c["kind"] for c in data["cases"]]
    print(f"{a.out}: {kinds.count('grammar')} grammars, {kinds.count('schema')} schemas, {n_str} strings "
          f"({n_tok} with tokens), {len(data['build'])} build checks "
          f"({sum(not b['accepted'] for b in data['build'])} must be rejected)")

if __name__ == "__main__": main()
