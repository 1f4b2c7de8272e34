"""Model families against llama.cpp without downloads: tools/family_models.py rebuilds each small random-weight GGUF
of a family (its real tensor names, types and metadata keys) from the arguments stored in tests/fixtures/family_*.json,
and llmbook's logits at every position must match llama.cpp's (made by tools/make_family_fixtures.py)."""
import base64, hashlib, json, sys
from pathlib import Path
import numpy as np
import pytest
import llmbook
from llmbook.int8 import host_features

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import write_family_model

RUNS = ["llama", "llama_swa", "qwen2", "qwen2_untied", "qwen3", "phi3", "phi3_rope_short", "phi3_rope_long", "gemma2"]
KERNELS = ["float", pytest.param("avx2", marks=pytest.mark.skipif("avx2" not in host_features(), reason="this CPU has no AVX2"))]

def fixture(case, wtype):
    return json.loads((FIXTURES / f"family_{case}_{wtype}.json").read_text())

@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    made = {}
    def make(fx):
        key = fx["model_sha256"]
        if key not in made:
            path = tmp_path_factory.mktemp("fam") / f"{fx['case']}_{fx['wtype']}.gguf"
            write_family_model(path, **fx["writer"])
            assert hashlib.sha256(path.read_bytes()).hexdigest() == key, "the writer no longer makes the fixture's file"
            made[key] = path
        return made[key]
    return make

def cosines(a, b):
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

CASES = [(case, wtype) for case in RUNS for wtype in ("F16", "Q4_K_M")] + [("llama", "IQ4_NL"), ("llama", "IQ4_XS"), ("qwen2", "IQ4_NL")]

@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("case, wtype", CASES)
def test_family_logits_match_llamacpp(model_file, case, wtype, kernels):
    fx = fixture(case, wtype)
    m = llmbook.load(model_file(fx), n_ctx=fx["llama_cpp"]["n_ctx"], kernels=kernels)
    ids = fx["prompt"] + fx["continuation"]
    ours = m.logits(ids)
    ref = np.frombuffer(base64.b64decode(fx["logits_f16"]), np.float16).astype(np.float32).reshape(len(ids), -1)
    cos = cosines(ours, ref)
    floor = 0.9999 if wtype == "F16" else 0.999
    assert cos.min() >= floor, (case, wtype, kernels, cos.round(5))
    margins = np.array(json.loads(fx["top2_margin"]) if isinstance(fx["top2_margin"], str) else fx["top2_margin"])
    # llama.cpp's own near-ties may go either way. On quantized weights it also rounds its KV cache to f16 and (with
    # the float kernels here) its activations to 8 bits, which moves logits by up to a few tenths
    clear = margins > (0.05 if wtype == "F16" else 0.3)
    differ = np.flatnonzero((ours.argmax(-1) != np.array(fx["argmax"])) & clear)
    assert not len(differ), (case, wtype, kernels, differ, margins[differ])

@pytest.mark.parametrize("name", ["iq4_nl", "iq4_xs"])
def test_iq4_dequantize_is_ggmls(name):
    "IQ4_NL / IQ4_XS blocks (random bytes, NaN and inf scales included) dequantize bit for bit as ggml's own code does."
    fx = json.loads((FIXTURES / "family_iq4_ggml.json").read_text())[name]
    raw = np.frombuffer(base64.b64decode(fx["dequantize"]["blocks"]), np.uint8)
    want = np.frombuffer(base64.b64decode(fx["dequantize"]["values_f32"]), np.float32)
    got = llmbook.dequantize(llmbook.QTensor(raw, llmbook.GGMLType[name.upper()], (fx["n_blocks"] * fx["block_values"],)))
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
