"""llama.cpp loads what GGUFWriter writes: tools/make_gguf_fixtures.py had llama.cpp load SmolLM2 rewritten by
our writer (alignment 64, tensors reversed, extra keys of every scalar type) and compare its logits with the
original's. Here we check that record and that the writer still produces exactly the file llama.cpp loaded."""
import hashlib, importlib.util
from pathlib import Path
import pytest
import llmbook.gguf as g
from conftest import load_fixture

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_gguf_fixtures.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("make_gguf_fixtures", TOOL)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def test_llama_cpp_read_our_file_exactly():
    fx = load_fixture("gguf_llamacpp.json")
    assert fx["tokens"] == fx["tokens_rewritten"] and len(fx["tokens"]) > 1
    assert fx["max_abs_logit_diff"] == 0.0          # every tensor read from the right place


def test_llama_cpp_saw_our_metadata_values():
    fx, tool = load_fixture("gguf_llamacpp.json"), load_tool()
    seen = fx["llama_cpp_metadata"]
    for key, (value, spec) in tool.EXTRA.items():
        if not isinstance(spec, str): continue          # llama.cpp's metadata dict leaves arrays out
        s = seen[key]
        if spec == "BOOL": assert s == str(value).lower(), key
        elif spec.startswith("FLOAT"): assert float(s) == pytest.approx(value, abs=1e-6), key
        elif spec == "STRING": assert s == value, key
        else: assert int(s) == value, key


def test_writer_still_writes_the_file_llama_cpp_loaded(smollm2_path, tmp_path):
    fx, tool = load_fixture("gguf_llamacpp.json"), load_tool()
    assert tool.sha256(smollm2_path) == fx["source_sha256"]
    out = tool.rewrite(smollm2_path, tmp_path / "rewritten.gguf", g)
    assert out.stat().st_size == fx["rewritten_bytes"]
    assert tool.sha256(out) == fx["rewritten_sha256"]
    f = g.GGUFFile(out)
    assert f.alignment == 64 and all(t.offset % 64 == 0 for t in f.tensors.values())
    assert list(f.tensors) == list(reversed(list(g.GGUFFile(smollm2_path).tensors)))
