"""Chapter 24: GBNF parsing (errors with line and column), the matcher on strings, JSON Schema -> grammar (every
constrained output parses and validates), and parity with llama.cpp's grammar sampler on SmolLM2
(tests/fixtures/grammar_smollm2.json, made by tools/make_grammar_fixtures.py): the same token mask at every step
(its size and the hash of its ids), and the same greedy tokens while the best allowed logit is clear."""
import hashlib, json
import numpy as np
import pytest
from conftest import load_fixture
from llmbook.grammar import (Grammar, GrammarError, GrammarMatcher, JSON_GRAMMAR, JSON_OBJECT_GRAMMAR, as_grammar,
                             json_schema_to_grammar, _vocab_trie)
from llmbook.loading import load

try: import jsonschema
except ImportError: jsonschema = None

# ---------------------------------------------------------------- the parser
@pytest.mark.parametrize("text, where, what", [
    ('root ::= "abc', "line 1, column 10", "unterminated literal"),
    ('root ::= [a-', "line 1, column 10", "unterminated character class"),
    ('root ::= x\n', "line 1, column 10", "undefined rule 'x'"),
    ('root ::= "a" | ("b"', "line 1, column 20", "expecting ')'"),
    ('root ::= "\\q"', "line 1, column 11", "unknown escape"),
    ('item ::= "x"', None, "no 'root' rule"),
    ('root ::= "a"{3,1}', "line 1, column 13", "max < min"),
    ('root ::= *', "line 1, column 10", "must follow an item"),
    ('root ::= "a"\nroot ::= "b"', "line 2, column 1", "defined twice"),
    ('root := "a"', "line 1, column 6", "expecting '::='"),
    ('root ::= [z-a]', "line 1, column 10", "empty range"),
    ('root ::= []', "line 1, column 10", "empty character class"),
    ('root ::= "\\x4"', "line 1, column 11", "hex digits"),
    ('root ::= "a"{1,100000}', "line 1, column 13", "limited"),
    ('root ::= "a" "b" )', "line 1, column 18", "unexpected character"),
    ('root ::= e\ne ::= e "+" "1" | "1"', None, "left recursion"),
    ('root ::= "a" | root "a"', None, "left recursion"),
    ('root ::= <[10]> "a"', "line 1, column 10", "token syntax"),
])
def test_parser_errors_name_the_place(text, where, what):
    with pytest.raises(GrammarError) as e: Grammar(text)
    assert what in str(e.value)
    if where: assert str(e.value).startswith(where), str(e.value)

def test_not_text():
    with pytest.raises(GrammarError): Grammar(b"root ::= 'a'")
    with pytest.raises(GrammarError): as_grammar(grammar=123)
    with pytest.raises(ValueError): as_grammar(grammar='root ::= "a"', json_schema={})

# ---------------------------------------------------------------- the matcher on strings
@pytest.mark.parametrize("grammar, yes, no", [
    ('root ::= "a" | "bc"', ["a", "bc"], ["", "b", "abc", "ab"]),
    ('root ::= [a-c]+ "!"?', ["a", "abcab!", "c!"], ["", "!", "ad", "a!!"]),
    ('root ::= [^abc]*', ["", "xyz", "é→"], ["a", "xa"]),
    ('root ::= "x"{2,3}', ["xx", "xxx"], ["x", "xxxx"]),
    ('root ::= "x"{2}', ["xx"], ["x", "xxx"]),
    ('root ::= "x"{2,} "y"', ["xxy", "xxxxxy"], ["xy", "xx"]),
    ('root ::= .{3}', ["abc", "é→x"], ["ab", "abcd"]),
    ('root ::= "\\n\\t\\\\\\"" [\\x41-\\x43] "\\u00e9" [\\U0001F600]', ['\n\t\\"Bé😀'], ['\n\t\\"Dé😀']),
    ('root ::= a b\na ::= "1" | # a comment\n  "2"\nb ::= ( "x"\n  | "y" )', ["1x", "2y"], ["3x", "1"]),
    ('root ::= list\nlist ::= "[" (item ("," item)*)? "]"\nitem ::= [0-9]+ | list', ["[]", "[1,[2,[]],33]"], ["[1,]", "[[]"]),
])
def test_matcher_on_strings(grammar, yes, no):
    g = Grammar(grammar)
    for t in yes: assert g.accepts_text(t), t
    for t in no: assert not g.accepts_text(t), t

def test_prefixes_and_bytes():
    g = Grammar('root ::= "é" [0-9]')
    assert g.accepts_text("é", complete=False) and not g.accepts_text("e", complete=False)
    s = g.step_bytes(g.start_state, "é".encode()[:1])          # inside a character: a partial state
    assert s >= 0 and g.end_ok[s]                                # a token may end here: é can still come
    assert g.step_bytes(s, b"\xa9") >= 0 and g.step_bytes(s, b"\xa8") < 0
    assert g.step_bytes(g.start_state, b"\x80") < 0              # a continuation byte cannot start a character

def test_json_grammar():
    g = Grammar(JSON_GRAMMAR)
    for t in ['{}', '[]', '"x"', '-0.5e+3', 'true', 'null', '{"a": [1, {"b": "\\u00e9\\n"}], "c": false}']:
        assert g.accepts_text(t), t
    for t in ['{', '{"a"}', '[1,]', '01', '"\x01"', "'a'", '{"a": 1,}']:
        assert not g.accepts_text(t), t
    assert Grammar(JSON_OBJECT_GRAMMAR).accepts_text('{"a": 1}') and not Grammar(JSON_OBJECT_GRAMMAR).accepts_text("[1]")

# ---------------------------------------------------------------- JSON Schema -> grammar
SCHEMAS = [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
     ['{"a": 1}', '{"a": -2, "b": "x"}'], ['{"b": "x"}', '{"a": 1.5}', '{"b": "x", "a": 1}', '{"a": 1, "c": 2}']),
    ({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}},
     ['{}', '{"b": null}', '{"a": true, "c": 1e5}', '{"c": 0.25}'], ['{"a": 1}', '{,}', '{"c": 1, "a": true}']),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
     ['[1]', '[1, 2, 3]'], ['[]', '[1, 2, 3, 4]', '["a"]']),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 0}, ['[]'], ['["a"]']),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"\\n\\t"'], ['"a"', '"abcd"']),
    ({"enum": ["red", "green", 3, None]}, ['"red"', '3', 'null'], ['"blue"', '"Red"']),
    ({"const": {"k": [1, "two"]}}, ['{"k":[1,"two"]}'], ['{"k": [1, "two"]}', '{}']),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, ['7', '"x"'], ['"xy"', 'true']),
    ({"oneOf": [{"type": "null"}, {"type": "boolean"}]}, ['null', 'false'], ['0']),
    ({"type": ["string", "null"]}, ['"a"', 'null'], ['1']),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                         "required": ["v", "next"]}}, "$ref": "#/$defs/node"},
     ['{"v": 1, "next": null}', '{"v": 1, "next": {"v": 2, "next": null}}'], ['{"v": 1}']),
    ({"definitions": {"x": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/definitions/x"}},
      "required": ["x"], "title": "T", "description": "ignored"}, ['{"x": 5}'], ['{"x": "5"}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": True},
     ['{"a": 1}', '{"a": 1, "z": [1, {}]}'], ['{"z": 1}']),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, ['{}', '{"p": 1, "q": 2}'], ['{"p": "x"}']),
    ({"type": "object"}, ['{}', '{"a": {"b": []}}'], ['[]', '1']),
    ({}, ['1', '"x"', '[{}]'], ['', '{']),
    ({"type": "object", "properties": {"o1": {"type": "integer"}, "r": {"type": "integer"}, "o2": {"type": "integer"}},
      "required": ["r"]}, ['{"r": 1}', '{"o1": 1, "r": 2}', '{"r": 2, "o2": 3}', '{"o1": 1, "r": 2, "o2": 3}'],
     ['{"o1": 1}', '{"o1": 1, "o2": 3}', '{, "r": 1}']),
]

@pytest.mark.parametrize("schema, yes, no", SCHEMAS, ids=[f"schema{i}" for i in range(len(SCHEMAS))])
def test_schema_grammar_accepts_what_validates(schema, yes, no):
    g = Grammar(json_schema_to_grammar(schema))
    for t in yes:
        assert g.accepts_text(t), t
        if jsonschema: jsonschema.validate(json.loads(t), schema)
    for t in no: assert not g.accepts_text(t), t

@pytest.mark.parametrize("schema, what", [
    ({"type": "string", "pattern": "^a(?=b)"}, "look-arounds"),
    ({"type": "string", "pattern": "^(a)\\1$"}, "back-references"),
    ({"type": "string", "pattern": "^a|b$"}, "'|' at the top"),
    ({"type": "string", "pattern": "^a$", "maxLength": 3}, "beside 'pattern'"),
    ({"type": "number", "minimum": 0.5}, "minimum 0.5"),
    ({"minimum": 0}, "without a type"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "no integer"),
    ({"type": "integer", "maximum": 10 ** 1000}, "18 digits"),
    ({"type": "string", "not": {"const": "a"}}, "'not'"),
    ({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "'allOf'"),
    ({"type": "thing"}, "unknown type"),
    ({"$ref": "#/$defs/Missing"}, "points at nothing"),
    ({"$ref": "http://x/schema"}, "only local $ref"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "not in properties"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "nothing could validate"),
    ({"type": "string", "maxLength": -1}, "maxLength"),
    ({"enum": []}, "non-empty"),
    ([1], "an object"),
    ('{"type": ', "not valid JSON"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^\\p{L}$"}}}, "#/properties/a"),
])
def test_unsupported_schemas_are_refused_by_name(schema, what):
    with pytest.raises(GrammarError) as e: json_schema_to_grammar(schema)
    assert what in str(e.value), str(e.value)

def test_as_grammar_caches_and_keeps_order():
    a = as_grammar(json_schema={"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "integer"}},
                                "required": ["z", "a"]})
    assert a is as_grammar(json_schema='{"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["z", "a"]}')
    assert a.accepts_text('{"z": 1, "a": 2}') and not a.accepts_text('{"a": 2, "z": 1}')

# ---------------------------------------------------------------- on the real model
FIX = load_fixture("grammar_smollm2.json")

@pytest.fixture(scope="module")
def smol(smollm2_path): return load(smollm2_path, n_ctx=1024)

def test_trie_holds_the_vocabulary(smol):
    trie = _vocab_trie(smol.tokenizer)
    assert trie is _vocab_trie(smol.tokenizer)                     # built once per tokenizer
    n_tokens = sum(1 for p in trie.pieces if p)
    assert len(trie.tokens) == n_tokens and trie.node_tokens[-1] == n_tokens
    assert len(trie.node_byte) < sum(len(p) for p in trie.pieces)  # shared prefixes

@pytest.mark.parametrize("case", FIX["cases"], ids=[c["name"] for c in FIX["cases"]])
def test_mask_is_llama_cpp_mask(smol, case):
    "Along llama.cpp's tokens, our mask has the same tokens at every step."
    m = GrammarMatcher(Grammar(case["grammar"]), smol.tokenizer)
    for step, (tok, n, sha) in enumerate(zip(case["tokens"], case["n_allowed"], case["allowed_sha"])):
        mask = m.mask()
        ids = np.flatnonzero(mask).astype(np.int64)
        assert (len(ids), hashlib.sha256(ids.tobytes()).hexdigest()[:16]) == (n, sha), (case["name"], step)
        assert m.allows(tok)
        m.accept(tok)

@pytest.mark.parametrize("case", FIX["cases"], ids=[c["name"] for c in FIX["cases"]])
def test_greedy_under_grammar_is_llama_cpp(smol, case):
    n = next((i for i, x in enumerate(case["margin"]) if x < 0.5), len(case["tokens"]))
    c = smol.generate(case["ids"], max_tokens=len(case["tokens"]), grammar=as_grammar(case["grammar"]))
    assert c.tokens[:n] == case["tokens"][:n], case["name"]
    if c.tokens == case["tokens"]: assert str(c) == case["text"] or smol.tokenizer.is_eog(c.tokens[-1])

def test_fixture_covers_the_cases():
    names = {c["name"] for c in FIX["cases"]}
    assert {"person", "json_object", "unicode", "list"} <= names
    assert any(max(c["n_allowed"]) > 40000 for c in FIX["cases"])           # inside strings: nearly everything
    assert any(min(c["n_allowed"]) == 1 for c in FIX["cases"])               # a forced token

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}

def test_sampled_outputs_always_parse_and_validate(smol):
    ask = [{"role": "user", "content": "Describe a person as JSON with name and age."}]
    for seed in range(4):
        c = smol.chat(ask, max_tokens=80, temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, seed=seed, grammar=as_grammar(json_schema=PERSON))
        assert c.stop_reason == "eos", (seed, c)
        value = json.loads(c)
        assert set(value) == {"name", "age"} and isinstance(value["age"], int) and len(value["name"]) <= 20
        if jsonschema: jsonschema.validate(value, PERSON)

def test_grammar_with_ignore_eos_stops_when_complete(smol):
    c = smol.generate("Answer:", max_tokens=20, grammar=as_grammar('root ::= " yes" | " no"'), ignore_eos=True)
    assert str(c) in (" yes", " no") and c.stop_reason == "stop"

def test_logprobs_and_bias(smol):
    c = smol.generate("The capital of France is", max_tokens=4, logprobs=3)
    assert len(c.logprobs) == len(c.tokens)
    for tid, lp, top in c.logprobs:
        assert lp <= 0 and len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1]
        assert tid == top[0][0] and abs(lp - top[0][1]) < 1e-6       # greedy: the best one
    first = c.tokens[0]
    d = smol.generate("The capital of France is", max_tokens=4, logit_bias={first: -float("inf")})
    assert d.tokens[0] != first
    with pytest.raises(ValueError, match="logprobs"): smol.generate("x", logprobs=21)
    with pytest.raises(ValueError, match="outside the vocabulary"): smol.generate("x", logit_bias={10**7: 1.0})
    steps = list(smol.generate("Hi", max_tokens=2, logprobs=0, stream=True, details=True))
    assert steps[0].logprob is not None and steps[0].top_logprobs == []
