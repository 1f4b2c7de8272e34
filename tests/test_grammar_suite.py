"""Chapter 24 against llama.cpp's own grammar suite and against grammars built to hurt.

- llama.cpp's tests/test-grammar-integration.cpp, extracted by tools/make_llamacpp_grammar_suite.py into
  tests/fixtures/grammar_llamacpp_suite.json: every string that does not use llama.cpp's token syntax (<[N]>) gets
  llama.cpp's answer, every schema converts, every grammar llama.cpp rejects is rejected (and the one it accepts
  with a custom start rule is accepted). There is no deliberate difference left: llama.cpp's `{}` is any value too.
- Bounded work: llama.cpp's "hang" grammar and our own explosive ones are refused (GrammarError, never a hang, a
  RecursionError or a memory blow-up) within 1 s; grammars llama.cpp accepts and runs are not refused.
- The new schema keywords (integer and number bounds, pattern, formats, tuples, extra keys that are not the listed
  names), each accepted output validated with jsonschema where it is installed, and pydantic models.
"""
import datetime, json, re, time, uuid
import pytest
from conftest import load_fixture
from llmbook.grammar import Grammar, GrammarError, as_grammar, json_schema_to_grammar

try: import jsonschema
except ImportError: jsonschema = None

SUITE = load_fixture("grammar_llamacpp_suite.json")
TOKENS = re.compile(r"<\[\d+\]>")

def _uses_tokens(case): return bool(TOKENS.search(case["text"])) or "!<[" in case["text"]

def _build(case):
    return Grammar(case["text"]) if case["kind"] == "grammar" else Grammar(json_schema_to_grammar(case["text"]))

def test_suite_fixture_is_whole():
    kinds = [c["kind"] for c in SUITE["cases"]]
    assert kinds.count("grammar") >= 14 and kinds.count("schema") >= 33
    assert sum(not b["accepted"] for b in SUITE["build"]) >= 6

@pytest.mark.parametrize("case", SUITE["cases"], ids=[f"{c['kind']}-line{c['line']}" for c in SUITE["cases"]])
def test_llamacpp_case(case):
    if _uses_tokens(case):
        assert all(s["tokens"] for s in case["passing"] + case["failing"])      # nothing else is skipped
        with pytest.raises(GrammarError, match="token syntax"): _build(case)
        return
    g = _build(case)
    for s in case["passing"]: assert g.accepts_text(s["text"]), (case["description"], s["text"])
    for s in case["failing"]: assert not g.accepts_text(s["text"]), (case["description"], s["text"])

@pytest.mark.parametrize("b", SUITE["build"], ids=[f"{b['function']}-line{b['line']}" for b in SUITE["build"]])
def test_llamacpp_build(b):
    if b["accepted"]: Grammar(b["grammar"], root=b["root"])
    else:
        with pytest.raises(GrammarError): Grammar(b["grammar"], root=b["root"])

# ---------------------------------------------------------------- bounded work
EXPLOSIVE = {
    "llama.cpp hang": 'root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}',
    "named chain": 'root ::= b{0,60}\nb ::= c{0,60}\nc ::= d{0,60}\nd ::= e{0,60}\ne ::= [^x]*',
    "left recursion llama.cpp misses": 'root ::= a root "x" | "y"\na ::= b\nb ::= "z" | ',
    "deep groups": "root ::= " + "(" * 5000 + '"a"' + ")" * 5000,
    "long literal repeated": 'root ::= "' + "a" * 1000 + '"{5000}',
    "rule chain": "root ::= r0\n" + "\n".join(f"r{i} ::= r{i + 1}" for i in range(5000)) + '\nr5000 ::= "a"',
}

# These grammars would run for minutes (or forever) if worked through; refused, they take about 0.2 s on a quiet
# AVX-512 EPYC. The 10 s bound only tells the two apart, with room for a busy CI machine.
REFUSED_WITHIN_S = 10.0

@pytest.mark.parametrize("name", EXPLOSIVE)
def test_explosive_grammars_are_refused_fast(name):
    t = time.perf_counter()
    try:
        g = Grammar(EXPLOSIVE[name])
        assert name == "rule chain" and g.accepts_text("a")      # 5,000 rules in a chain are fine, and checked iteratively
    except GrammarError as e:
        assert name != "rule chain", e
    assert time.perf_counter() - t < REFUSED_WITHIN_S

def test_explosion_after_the_first_character_is_refused_at_that_step():
    g = Grammar('root ::= "a" b{0,60}\nb ::= c{0,60}\nc ::= d{0,60}\nd ::= [^x]*')
    t = time.perf_counter()
    with pytest.raises(GrammarError, match="too ambiguous"): g.accepts_text("ab")
    assert time.perf_counter() - t < REFUSED_WITHIN_S

def test_explosive_schema_pattern():
    s = {"type": "string", "pattern": "^((((((a*){0,99}){0,99}){0,99}){0,99}){0,99})$"}
    t = time.perf_counter()
    with pytest.raises(GrammarError, match="too ambiguous"): as_grammar(json_schema=s).accepts_text('"aa"')
    assert time.perf_counter() - t < REFUSED_WITHIN_S
    deep = {"type": "array"}
    for _ in range(500): deep = {"type": "array", "items": deep}
    with pytest.raises(GrammarError, match="nested more than"): json_schema_to_grammar(deep)
    with pytest.raises(GrammarError, match="nested"): json_schema_to_grammar("[" * 100_000)

@pytest.mark.parametrize("text, yes, no", [
    ("root ::= ( [x]* )*", ["", "x", "xx"], ["y"]),
    ('root ::= ("a"?)*', ["", "a", "aaa"], ["b"]),
    ('root ::= (ws | "x")*\nws ::= [ ]*', ["", " x  x", "xx"], ["y"]),
    ("root ::= " + " | ".join(f'"w{i}"' for i in range(15000)), ["w0", "w14999"], ["w15000", "w"]),
])
def test_what_llamacpp_runs_we_run(text, yes, no):
    g = Grammar(text)
    for t in yes: assert g.accepts_text(t), t
    for t in no: assert not g.accepts_text(t), t

# ---------------------------------------------------------------- schema keywords
KEYWORDS = [
    ({"type": "integer", "minimum": -15, "maximum": 1234}, ["-15", "-9", "0", "7", "999", "1234"],
     ["-16", "-0", "1235", "01", "9999"]),
    ({"type": "integer", "exclusiveMinimum": 1.5, "exclusiveMaximum": 10}, ["2", "9"], ["1", "10"]),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 3, "exclusiveMinimum": True},
     ["4"], ["3"]),                                                                      # draft 4's form
    ({"type": "number", "minimum": 0, "maximum": 10}, ["0", "0.5", "10", "10.000", "3.25"], ["-0.5", "10.01", "11", "-1"]),
    ({"type": "number", "exclusiveMinimum": 0}, ["0.001", "12.50", "3"], ["0", "0.000", "-1", "-0.5"]),
    ({"type": "number", "minimum": -2, "exclusiveMaximum": 0}, ["-2", "-0.5", "-1.99"], ["0", "-2.01", "1", "-0"]),
    ({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, ['"AB-123"'], ['"ab-123"', '"AB-12"', '"AB-1234"']),
    ({"type": "string", "pattern": "b+c"}, ['"abbcd"', '"bc"'], ['"ac"']),                  # unanchored: anywhere
    ({"type": "string", "pattern": '^[^a]"?$'}, ['"x\\""', '"\\\\"', '"\\n"'], ['"a"', '"x""']),   # JSON escapes
    ({"type": "string", "pattern": "^(?:ab|c)*\\.$"}, ['"abc."', '"."'], ['"abcb."']),
    ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2024-13-01"', '"24-01-01"']),
    ({"type": "string", "format": "time"}, ['"23:59:59Z"', '"08:00:00.5+02:00"'], ['"24:00:00Z"', '"08:00:00"']),
    ({"type": "string", "format": "date-time"}, ['"2024-01-31T12:00:00Z"'], ['"2024-01-31 12:00:00Z"']),
    ({"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123e4567"']),
    ({"type": "string", "format": "email"}, ['"anything"'], ["1"]),                      # unknown formats: annotations
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, ['[1, "a"]'], ['[1]', '[1, "a", 2]']),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}, "maxItems": 3},
     ['[1]', '[1, true, false]'], ['[1, 2]', '[1, true, true, true]']),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "null"}, {"const": 1}]},
     ['[null, 1]'], ['[null]']),                                                         # draft 7's tuples
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, ['[1, 2]'], ['["a"]']),   # ignored
    ({"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}}, "additionalProperties": True},
     ['{"a": 1, "b": ""}', '{"abc": "x"}', '{"": 1}', '{"a": 1, "ab": 2, "x": null}'],
     ['{"a": ""}', '{"ab": ""}', '{"a": 1, "a": ""}', '{"a": 1, "\\u0061": ""}']),
    ({"allOf": [{"type": "integer", "minimum": 1}]}, ["1"], ["0"]),
]

@pytest.mark.parametrize("schema, yes, no", KEYWORDS, ids=[f"kw{i}" for i in range(len(KEYWORDS))])
def test_schema_keywords(schema, yes, no):
    g = Grammar(json_schema_to_grammar(schema))
    for t in yes:
        assert g.accepts_text(t), t
        if jsonschema: jsonschema.validate(json.loads(t), schema)        # formats are annotations: checked below
        fmt = schema.get("format")
        if fmt == "date": datetime.date.fromisoformat(json.loads(t))
        if fmt == "time": datetime.datetime.fromisoformat("2000-01-01T" + json.loads(t))
        if fmt == "date-time": datetime.datetime.fromisoformat(json.loads(t))
        if fmt == "uuid": uuid.UUID(json.loads(t))
    for t in no: assert not g.accepts_text(t), t

def test_integer_ranges_exhaustively():
    "Every integer from -1100 to 1100 against three ranges: the grammar says yes exactly when the range does."
    for lo, hi in [(-123, 42), (7, 1000), (-1000, -99)]:
        g = Grammar(json_schema_to_grammar({"type": "integer", "minimum": lo, "maximum": hi}))
        for v in range(-1100, 1101): assert g.accepts_text(str(v)) == (lo <= v <= hi), (lo, hi, v)

# ---------------------------------------------------------------- pydantic
def test_pydantic_models_convert():
    pydantic = pytest.importorskip("pydantic", reason="pydantic is a dev dependency (tools/setup.sh --dev)")
    from enum import Enum
    from typing import Optional
    from pydantic import BaseModel, Field
    class Color(str, Enum): red = "red"; green = "green"
    class Address(BaseModel):
        street: str = Field(min_length=1, max_length=40)
        zip_code: str = Field(pattern=r"^\d{5}$")
    class Person(BaseModel):
        name: str
        age: int = Field(ge=0, le=130)
        height_m: float = Field(gt=0, lt=3)
        color: Color = Color.red
        nickname: Optional[str] = None
        tags: set[str] = Field(default_factory=set, max_length=3)
        pair: tuple[int, str] = (0, "")
        address: Address
    schema = Person.model_json_schema()
    g = Grammar(json_schema_to_grammar(schema))
    ok = ('{"name": "Ann", "age": 42, "height_m": 1.7, "color": "green", "nickname": null, "tags": ["a"], '
          '"pair": [1, "x"], "address": {"street": "Main", "zip_code": "12345"}}')
    assert g.accepts_text(ok)
    Person.model_validate_json(ok)
    assert g.accepts_text('{"name": "Bo", "age": 0, "height_m": 0.5, "address": {"street": "x", "zip_code": "00000"}}')
    for bad in [ok.replace('"age": 42', '"age": 131'), ok.replace("1.7", "3"), ok.replace('"green"', '"blue"'),
                ok.replace("12345", "1234"), ok.replace('"Main"', '""')]:
        assert not g.accepts_text(bad), bad

def test_number_ranges_on_a_grid():
    "Numbers in quarters from -12.75 to 12.75, written as Python writes them: accepted exactly when in range (a '-0'"
    " spelling may be refused where 0 is allowed: a grammar may allow less than the schema, never more)."
    texts = set()
    for q in range(-51, 52):
        v = q / 4
        texts |= {repr(v), f"{v:.3f}"} | ({str(int(v))} if v == int(v) else set())
    for lo, lo_open, hi, hi_open in [(-3, False, 5, False), (-3, True, 5, True), (0, True, None, False),
                                     (None, False, -2, True), (-10, False, -1, False), (2, False, 2, False)]:
        schema = {"type": "number"}
        if lo is not None: schema["exclusiveMinimum" if lo_open else "minimum"] = lo
        if hi is not None: schema["exclusiveMaximum" if hi_open else "maximum"] = hi
        g = Grammar(json_schema_to_grammar(schema))
        for t in texts:
            v = float(t)
            want = (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi))
            got = g.accepts_text(t)
            if got: assert want, (schema, t)
            if want and not (v == 0 and t.startswith("-")): assert got, (schema, t)
