"""Issue 41: the six families llama.cpp's converter takes, from Hugging Face checkpoints saved by transformers itself.

tests/fixtures/hf/<family>/ holds a tiny random checkpoint of each (BF16 safetensors, config.json, tokenizer.json
made with the `tokenizers` library, tokenizer_config.json), transformers' float32 logits on it and llama.cpp's
logits on the GGUF file `llmbook.hf.convert` writes from it (logits.npz), and the `tokenizers` library's ids of
the tokenizer-parity strings (expected.json); tools/make_hf_families.py made them. Neither transformers nor torch
is needed here. gptoss_mxfp4 is gpt-oss as OpenAI releases it: the experts in MXFP4 `*_blocks` / `*_scales`."""
import json, shutil, warnings
from pathlib import Path
import numpy as np
import pytest
import llmbook
from llmbook.gguf import GGUFFile
from llmbook.hf import HFError, read_hf, convert, load_source, read_safetensors, write_safetensors, HF_ARCHS
from llmbook.tokenizer import Tokenizer
from llmbook.tokenizer_extras import EXTRAS
from test_hf import STRINGS

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
FAMILIES = ["phi3", "gemma2", "mixtral", "qwen3moe", "olmoe", "gptoss", "gptoss_mxfp4"]
ARCH = {"phi3": "phi3", "gemma2": "gemma2", "mixtral": "llama", "qwen3moe": "qwen3moe", "olmoe": "olmoe",
        "gptoss": "gpt-oss", "gptoss_mxfp4": "gpt-oss"}
MARGIN = 0.05       # top-1 is compared where the reference's first two logits are at least this far apart

# random vocabularies are not in llama.cpp's table of pre-tokenizer hashes: read_hf warns, as it should
pytestmark = pytest.mark.filterwarnings("ignore:the tokenizer's pre-tokenizer hash")

def cosines(a, b):
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

def references(family):
    z = np.load(FIXTURES / family / "logits.npz")
    n = len([k for k in z.files if k.startswith("ids_")])
    return [(z[f"ids_{i}"].tolist(), z[f"hf_{i}"].astype(np.float32), z[f"lcpp_{i}"].astype(np.float32)) for i in range(n)]

def same_logits(ours, ref, what):
    cos = cosines(ours, ref)
    assert cos.min() >= 0.999, (what, cos.min())
    top = np.sort(ref, -1)
    clear = top[:, -1] - top[:, -2] > MARGIN
    assert (ours.argmax(-1) == ref.argmax(-1))[clear].all(), what

@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("llmbook-cache")

@pytest.fixture(scope="module", params=FAMILIES)
def family(request, cache):
    "(family, the GGUF file `llmbook.load(DIR)` converted the checkpoint into, the model loaded from the directory)."
    mp = pytest.MonkeyPatch()
    mp.setenv("LLMBOOK_CACHE", str(cache))
    d = FIXTURES / request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = llmbook.load(d, kernels="float")          # the directory itself: converted once into the cache
        path = load_source(d)
    mp.undo()
    return request.param, path, model

def test_load_matches_transformers(family):
    "llmbook.load(DIR) gives transformers' float32 logits of the BF16 checkpoint (cosine >= 0.999, same top-1)."
    name, _, model = family
    for ids, hf, _ in references(name):
        same_logits(model.logits(ids), hf, (name, "transformers"))

def test_convert_matches_llamacpp(family):
    "llama.cpp loaded the same converted GGUF (F16) and gave these logits: ours agree, and both agree with transformers."
    name, path, model = family
    with GGUFFile(path) as g:
        assert g.metadata["general.architecture"] == ARCH[name] and g.metadata["general.file_type"] == 1
    for ids, hf, lcpp in references(name):
        same_logits(model.logits(ids), lcpp, (name, "llama.cpp"))
        same_logits(lcpp, hf, (name, "llama.cpp vs transformers"))

@pytest.mark.parametrize("name", FAMILIES)
def test_tokenizer_matches_tokenizers_library(name):
    "Our tokenizer, from the metadata read_hf makes of tokenizer.json, gives the `tokenizers` library's ids."
    d = FIXTURES / name
    md, _ = read_hf(d)
    tok = Tokenizer(md, EXTRAS)
    expected = json.loads((d / "expected.json").read_text())["tokenizer_ids"]
    assert len(expected) == len(STRINGS)
    for s, ids in zip(STRINGS, expected):
        assert tok.encode(s, add_special=False, parse_special=True) == ids, (name, s)
    tokenizers = pytest.importorskip("tokenizers")           # the library itself, when installed: the same ids
    ht = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    for s in STRINGS: assert ht.encode(s, add_special_tokens=False).ids == tok.encode(s, add_special=False, parse_special=True)
    tc = json.loads((d / "tokenizer_config.json").read_text())
    assert md["tokenizer.chat_template"] == tc["chat_template"]
    assert md["tokenizer.ggml.eos_token_id"] == ht.token_to_id(tc["eos_token"])

def test_tokenizer_kinds():
    "SentencePiece-style tokenizer.json (Phi-3 with a space prefix, Gemma 2 without); byte-level with each family's pre-tokenizer."
    kinds = {}
    for name in ("phi3", "gemma2", "mixtral", "qwen3moe", "olmoe", "gptoss"):
        md, _ = read_hf(FIXTURES / name)
        kinds[name] = (md["tokenizer.ggml.model"], md["tokenizer.ggml.pre"], md.get("tokenizer.ggml.add_space_prefix"))
    assert kinds == {"phi3": ("llama", "default", True), "gemma2": ("llama", "default", False),
                     "mixtral": ("llama", "default", True), "qwen3moe": ("gpt2", "qwen2", None),
                     "olmoe": ("gpt2", "gpt-2", None), "gptoss": ("gpt2", "gpt-4o", None)}
    md, _ = read_hf(FIXTURES / "phi3")
    toks, types, scores = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"], md["tokenizer.ggml.scores"]
    assert types[toks.index("<0x41>")] == 6 and types[toks.index("<unk>")] == 2 and types[toks.index("<|end|>")] == 3
    assert scores[toks.index("\u2581th")] > scores[toks.index("\u2581the")]      # merged earlier: a higher score

def test_family_metadata_and_tensors():
    "Each family's keys and tensor names, as llama.cpp's converter writes them."
    md, t = read_hf(FIXTURES / "phi3")
    assert md["phi3.rope.dimension_count"] == 8 and md["phi3.attention.sliding_window"] == 0
    assert md["phi3.rope.scaling.original_context_length"] == 4096 and "phi3.attention.key_length" not in md
    assert t["blk.0.attn_qkv.weight"].shape == (32 + 2 * 16, 32) and t["blk.0.ffn_up.weight"].shape == (2 * 64, 32)
    md, t = read_hf(FIXTURES / "gemma2")
    assert (md["gemma2.attn_logit_softcapping"], md["gemma2.final_logit_softcapping"], md["gemma2.attention.sliding_window"]) == (50.0, 30.0, 4)
    assert "output.weight" not in t and {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"} <= set(t)
    raw = read_safetensors(FIXTURES / "gemma2" / "model.safetensors")["model.norm.weight"].tensor()
    assert np.allclose(t["output_norm.weight"], llmbook.dequantize(raw) + 1)                  # stored as w - 1
    md, t = read_hf(FIXTURES / "mixtral")
    assert (md["llama.expert_count"], md["llama.expert_used_count"]) == (4, 2)
    assert t["blk.1.ffn_gate_exps.weight"].shape == (4, 32, 32) and t["blk.1.ffn_down_exps.weight"].shape == (4, 32, 32)
    e = read_safetensors(FIXTURES / "mixtral" / "model.safetensors")
    w3 = e["model.layers.1.block_sparse_moe.experts.2.w3.weight"].tensor()
    assert np.array_equal(llmbook.dequantize(t["blk.1.ffn_up_exps.weight"]).reshape(4, 32, 32)[2], llmbook.dequantize(w3).reshape(32, 32))
    md, t = read_hf(FIXTURES / "qwen3moe")
    assert md["qwen3moe.expert_feed_forward_length"] == 32 and md["qwen3moe.attention.key_length"] == 8
    assert t["blk.0.ffn_gate_inp.weight"].shape == (4, 32) and t["blk.0.attn_k_norm.weight"].shape == (8,)
    md, t = read_hf(FIXTURES / "olmoe")
    assert md["olmoe.feed_forward_length"] == 32 and t["blk.0.attn_k_norm.weight"].shape == (32,)
    md, t = read_hf(FIXTURES / "gptoss")
    assert md["gpt-oss.rope.scaling.type"] == "yarn" and md["gpt-oss.rope.scaling.factor"] == 32.0
    assert md["gpt-oss.rope.scaling.original_context_length"] == 4096 and md["gpt-oss.attention.sliding_window"] == 4
    assert md["gpt-oss.expert_feed_forward_length"] == 32
    assert t["blk.0.attn_sinks.weight"].shape == (4,) and t["blk.0.ffn_gate_inp.bias"].shape == (4,)
    assert t["blk.0.ffn_gate_exps.bias"].shape == (4, 32) and t["blk.0.ffn_up_exps.weight"].shape == (4, 32, 32)
    e = read_safetensors(FIXTURES / "gptoss" / "model.safetensors")
    gu = llmbook.dequantize(e["model.layers.0.mlp.experts.gate_up_proj"].tensor()).reshape(4, 32, 64)   # (expert, in, out)
    assert np.array_equal(llmbook.dequantize(t["blk.0.ffn_up_exps.weight"]).reshape(4, 32, 32)[1], gu[1, :, 1::2].T)

def test_mxfp4_kept_bit_for_bit(tmp_path):
    "gpt-oss's MXFP4 experts: repacked, never rounded, into GGML MXFP4 that holds the same numbers as OpenAI's layout."
    d = FIXTURES / "gptoss_mxfp4"
    out = convert(d, tmp_path / "g.gguf", "F16").path
    with GGUFFile(out) as g:
        types = {n: t.type for n, t in g.tensors.items()}
        assert {types[f"blk.0.ffn_{w}_exps.weight"] for w in ("gate", "up", "down")} == {"MXFP4"}
        assert types["blk.0.attn_q.weight"] == "F16" and types["blk.0.ffn_gate_exps.bias"] == "F32"
        down = g.dequantize("blk.1.ffn_down_exps.weight")
    e = read_safetensors(d / "model.safetensors")
    blocks, scales = e["model.layers.1.mlp.experts.down_proj_blocks"].u8(), e["model.layers.1.mlp.experts.down_proj_scales"].u8()
    lut = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    vals = np.stack([lut[blocks & 15], lut[blocks >> 4]], -1).reshape(*blocks.shape[:-1], 32)    # OpenAI: 2j low, 2j+1 high
    ref = (vals * np.exp2(scales.astype(np.float32) - 127)[..., None]).reshape(down.shape)
    assert np.array_equal(down, ref)

def test_table_lists_the_families():
    assert {"Phi3ForCausalLM", "Gemma2ForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM", "OlmoeForCausalLM",
            "GptOssForCausalLM"} <= set(HF_ARCHS)
    assert all(HF_ARCHS[h].note for h in ("Phi3ForCausalLM", "GptOssForCausalLM", "MixtralForCausalLM"))

# ---- bad checkpoints: an HFError that names what is wrong ----

def copy(name, tmp_path):
    d = tmp_path / name
    shutil.copytree(FIXTURES / name, d)
    return d

def edit_config(d, **changes):
    c = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if v is None: c.pop(k, None)
        else: c[k] = v
    (d / "config.json").write_text(json.dumps(c))

def drop_tensor(d, name):
    "Rewrite d/model.safetensors without tensor `name`, every other tensor's bytes as they were."
    raw = (d / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    assert name in header
    new, chunks, off = {}, [], 0
    for k, v in header.items():
        if k == name: continue
        if k == "__metadata__": new[k] = v; continue
        b = data[v["data_offsets"][0]:v["data_offsets"][1]]
        new[k] = {**v, "data_offsets": [off, off + len(b)]}; chunks.append(b); off += len(b)
    head = json.dumps(new).encode(); head += b" " * (-(len(head) + 8) % 8)
    (d / "model.safetensors").write_bytes(len(head).to_bytes(8, "little") + head + b"".join(chunks))

def test_missing_expert(tmp_path):
    d = copy("mixtral", tmp_path)
    drop_tensor(d, "model.layers.1.block_sparse_moe.experts.3.w2.weight")
    with pytest.raises(HFError, match=r"model\.layers\.1\.block_sparse_moe\.experts\.\{j\}\.w2\.weight: config\.json has 4 "
                                      r"experts, the checkpoint 3 \(model\.layers\.1\.block_sparse_moe\.experts\.3\.w2\.weight is missing\)"):
        read_hf(d)

def test_missing_layer_tensor(tmp_path):
    d = copy("qwen3moe", tmp_path)
    drop_tensor(d, "model.layers.1.self_attn.o_proj.weight")
    with pytest.raises(HFError, match=r"model\.layers\.1\.self_attn\.o_proj\.weight is missing"): read_hf(d)

@pytest.mark.parametrize("family, edit, message", [
    ("olmoe", {"hidden_size": 48}, r"has shape \[\d+, 32\], not \[n_vocab, 48\]|hidden_size says \[48\]"),
    ("qwen3moe", {"norm_topk_prob": False}, "norm_topk_prob is false; llama.cpp's qwen3moe renormalizes"),
    ("olmoe", {"norm_topk_prob": True}, "norm_topk_prob is true; llama.cpp's olmoe"),
    ("qwen3moe", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}},
     r"RoPE scaling 'dynamic' is not supported"),
    ("gemma2", {"query_pre_attn_scalar": 256}, r"query_pre_attn_scalar 256; llama.cpp's gemma2 scales attention by 1/sqrt\(8\)"),
])
def test_config_refused(tmp_path, family, edit, message):
    "A config.json that does not fit its weights, or that llama.cpp would run as another model: refused, saying why."
    d = copy(family, tmp_path)
    edit_config(d, **edit)
    with pytest.raises(HFError, match=message): read_hf(d)

def test_mxfp4_scales_missing(tmp_path):
    d = copy("gptoss_mxfp4", tmp_path)
    drop_tensor(d, "model.layers.0.mlp.experts.down_proj_scales")
    with pytest.raises(HFError, match=r"model\.layers\.0\.mlp\.experts\.down_proj_blocks has no "
                                      r"model\.layers\.0\.mlp\.experts\.down_proj_scales"):
        read_hf(d)

def test_phi3_longrope(tmp_path):
    "LongRoPE: two factor tensors of half the rotated dimensions and the converter's attention factor; bad lengths refused."
    d = copy("phi3", tmp_path)
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "long_factor": [1.0, 2.0, 4.0, 8.0],
            "short_factor": [1.0, 1.0, 1.1, 1.2], "original_max_position_embeddings": 1024}
    edit_config(d, rope_parameters=rope, max_position_embeddings=4096, original_max_position_embeddings=1024)
    md, t = read_hf(d)
    assert md["phi3.rope.scaling.original_context_length"] == 1024
    assert np.isclose(md["phi3.rope.scaling.attn_factor"], np.sqrt(1 + np.log(4) / np.log(1024)))
    assert t["rope_factors_long.weight"].tolist() == [1, 2, 4, 8] and t["rope_factors_short.weight"].shape == (4,)
    edit_config(d, rope_parameters={**rope, "long_factor": [1.0, 2.0]})
    with pytest.raises(HFError, match="LongRoPE needs long_factor and short_factor of 4 numbers each"): read_hf(d)

# ---- export back to Hugging Face, where it is a rename: Phi-3 (with LongRoPE) and Gemma 2 ----

@pytest.mark.parametrize("arch, kwargs", [("phi3", {}), ("phi3", {"rope_factors": True, "original_context_length": 1024}),
                                          ("gemma2", {"sliding_window": 4})])
def test_export_and_back(tmp_path, arch, kwargs):
    "A GGUF of the family, exported as a checkpoint and converted again, is the same model (F32 both ways)."
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    from family_models import write_family_model
    from llmbook.hf import export_hf
    src = write_family_model(tmp_path / "src.gguf", arch, wtype="F32", **kwargs)
    d = export_hf(src, tmp_path / "ckpt", dtype="F32")
    config = json.loads((d / "config.json").read_text())
    assert config["architectures"] == [HF_ARCHS[{"phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM"}[arch]].hf]
    out = convert(d, tmp_path / "back.gguf", "F32").path
    with GGUFFile(src) as a, GGUFFile(out) as b:
        assert sorted(a.tensors) == sorted(b.tensors)
        for k, v in a.metadata.items():
            if k.startswith(f"{arch}.") and k in b.metadata:
                assert b.metadata[k] == pytest.approx(v), k
    ids = list(range(5, 25))
    ref, back = llmbook.load(src, kernels="float").logits(ids), llmbook.load(out, kernels="float").logits(ids)
    assert np.abs(back - ref).max() < 1e-4 * np.abs(ref).max()

def test_export_refuses_experts(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    from family_models import write_family_model
    from llmbook.hf import export_hf
    src = write_family_model(tmp_path / "src.gguf", "qwen3moe", wtype="F32")
    with pytest.raises(HFError, match="architecture 'qwen3moe'"): export_hf(src, tmp_path / "ckpt")
    src = write_family_model(tmp_path / "mix.gguf", "llama", wtype="F32", moe=True)
    with pytest.raises(HFError, match="a mixture of experts"): export_hf(src, tmp_path / "ckpt")

@pytest.mark.parametrize("name", ["qwen3moe", "mixtral"])
def test_transformers5_fused_expert_layout(tmp_path, name):
    "Experts already stacked as transformers 5 holds them (gate_up_proj, gate first; down_proj; under mlp): the same GGUF tensors."
    from llmbook.tensors import QTensor, GGMLType
    d = copy(name, tmp_path)
    md0, t0 = read_hf(FIXTURES / name)
    e = read_safetensors(d / "model.safetensors")
    bits = lambda n: np.array(e[n].tensor().data).view(np.uint16).reshape(e[n].shape)
    w = {"qwen3moe": ("mlp", "gate_proj", "up_proj", "down_proj"), "mixtral": ("block_sparse_moe", "w1", "w3", "w2")}[name]
    out = {}
    for n in e:
        if ".experts." in n: continue
        out[n.replace("block_sparse_moe.", "mlp.")] = QTensor(bits(n), GGMLType.BF16, e[n].shape)
    for i in range(2):
        p = f"model.layers.{i}.{w[0]}.experts"
        stack = lambda k: np.stack([bits(f"{p}.{j}.{k}.weight") for j in range(4)])
        gate_up = np.concatenate([stack(w[1]), stack(w[2])], axis=1)
        out[f"model.layers.{i}.mlp.experts.gate_up_proj"] = QTensor(gate_up, GGMLType.BF16, gate_up.shape)
        out[f"model.layers.{i}.mlp.experts.down_proj"] = QTensor(stack(w[3]), GGMLType.BF16, stack(w[3]).shape)
    del e
    write_safetensors(d / "model.safetensors", out)
    md1, t1 = read_hf(d)
    assert md0 == {**md1, "general.name": md0["general.name"]} and sorted(t0) == sorted(t1)
    for n in t0:
        a, b = t0[n], t1[n]
        assert np.array_equal(np.asarray(a.data if hasattr(a, "data") else a), np.asarray(b.data if hasattr(b, "data") else b)), n

def test_phi3_longrope_logits(tmp_path):
    "The phi3 checkpoint with LongRoPE (original context 16, so the long factors apply): transformers' and llama.cpp's logits."
    d = copy("phi3", tmp_path)
    edit_config(d, **json.loads((d / "expected.json").read_text())["longrope_config"])
    out = convert(d, tmp_path / "phi3-longrope.gguf", "F16").path
    with GGUFFile(out) as g:
        assert g.metadata["phi3.rope.scaling.original_context_length"] == 16
        assert np.isclose(g.metadata["phi3.rope.scaling.attn_factor"], np.sqrt(1 + np.log(256) / np.log(16)))
        assert g.dequantize("rope_factors_long.weight").tolist() == [1.0, 1.5, 3.0, 8.0]
    z = np.load(d / "logits_longrope.npz")
    ids, hf, lcpp = z["ids_0"].tolist(), z["hf_0"].astype(np.float32), z["lcpp_0"].astype(np.float32)
    ours = llmbook.load(out, kernels="float", n_ctx=256).logits(ids)
    same_logits(ours, hf, "LongRoPE vs transformers")
    same_logits(ours, lcpp, "LongRoPE vs llama.cpp")
    plain = references("phi3")[0][1]
    assert cosines(hf, plain).min() < 0.99          # the scaling matters: not the model without it

@pytest.mark.parametrize("name", ["mixtral", "gptoss_mxfp4"])
def test_cli_convert_quantized(tmp_path, name):
    "`llmbook convert DIR OUT --type Q8_0`: experts Q8_0 (MXFP4 ones kept), routers and biases F32, the same model still."
    from llmbook.cli import main
    out = tmp_path / "q8.gguf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["convert", str(FIXTURES / name), str(out), "--type", "Q8_0", "--quiet"]) == 0
    with GGUFFile(out) as g:
        types = {n: t.type for n, t in g.tensors.items()}
    assert types["blk.0.ffn_gate_inp.weight"] == "F32" and types["blk.0.attn_q.weight"] == "Q8_0"
    assert types["blk.1.ffn_down_exps.weight"] == ("MXFP4" if name.endswith("mxfp4") else "Q8_0")
    ids, hf, _ = references(name)[0]
    assert cosines(llmbook.load(out, kernels="float").logits(ids), hf).min() >= 0.999
