"""Hugging Face checkpoints (llmbook.hf), without a network: the default model exported as a checkpoint directory and
converted back gives the same logits and token ids; tiny random llama/gemma3 checkpoints in F32/F16/BF16 and shards;
bad directories give errors that name the file; a hub cache made by hand resolves `org/repo:QUANT` offline;
llama.cpp's logits on the converted file (tests/fixtures/hf_llamacpp.json, made by tools/make_hf_fixtures.py)."""
import hashlib, json, os, shutil, subprocess, sys, warnings
from pathlib import Path
import numpy as np
import pytest
import llmbook
from llmbook.gguf import GGUFFile
from llmbook.tensors import GGMLType, QTensor
from llmbook.hf import (HFError, HubError, read_safetensors, write_safetensors, read_hf, convert, export_hf,
                        permute_qk, _unpermute_qk, _pick_gguf, _resolve_hub, load_source, _converted_path, _CHKTXT)
from conftest import load_fixture

from llmbook.testmodels import write_random_chat_model

STRINGS = ["Hello world", " leading space", "numbers 1234567 and 3.14", "emoji 🦙🚀 and 你好",
           "<|im_start|>user\nhi<|im_end|>", "tabs\tand\nnewlines\n\n  x", "I'll've they're 'RE", "café naïve", _CHKTXT]

# random vocabularies are not in llama.cpp's table of pre-tokenizer hashes: read_hf warns, as it should
pytestmark = pytest.mark.filterwarnings("ignore:the tokenizer's pre-tokenizer hash")

def cosines(a, b):
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

def load(path):
    # float kernels on both sides: the integer kernels round activations differently for Q4_1 and F16 weights,
    # which is a kernel difference, not a conversion one
    return llmbook.load(path, kernels="float")

# ---- the default model, exported and converted back ----

@pytest.fixture(scope="module")
def smol_roundtrip(tmp_path_factory, smollm2_path):
    tmp = tmp_path_factory.mktemp("hf")
    d = export_hf(smollm2_path, tmp / "SmolLM2-135M-Instruct")
    return smollm2_path, d, convert(d, tmp / "smollm2-f16.gguf", "F16").path

def test_export_writes_a_checkpoint(smol_roundtrip):
    _, d, _ = smol_roundtrip
    assert sorted(p.name for p in d.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    config = json.loads((d / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["num_hidden_layers"] == 30
    assert config["tie_word_embeddings"] is True
    entries = read_safetensors(d / "model.safetensors")
    assert entries["model.layers.0.self_attn.q_proj.weight"].shape == (576, 576)
    assert entries["model.layers.0.self_attn.k_proj.weight"].shape == (192, 576)
    assert all(e.dtype == "F16" for e in entries.values()) and "lm_head.weight" not in entries
    assert "chat_template" in json.loads((d / "tokenizer_config.json").read_text())

def test_roundtrip_metadata_and_tensors(smol_roundtrip):
    src, _, out = smol_roundtrip
    with GGUFFile(src) as o, GGUFFile(out) as g:
        for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.pre",
                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                  "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix",
                  "tokenizer.chat_template", "llama.block_count", "llama.context_length", "llama.embedding_length",
                  "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
                  "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon", "llama.vocab_size",
                  "llama.rope.dimension_count"):
            assert g.metadata[k] == o.metadata[k], k
        assert g.metadata["tokenizer.ggml.pre"] == "smollm"          # found by the hash, as llama.cpp does
        assert g.metadata["general.file_type"] == 1
        assert sorted(g.tensors) == sorted(o.tensors)
        for name, t in g.tensors.items():
            assert t.type == ("F32" if len(t.dims) == 1 else "F16"), name
            a, b = o.dequantize(name), g.dequantize(name)        # the permutation is undone exactly
            assert np.abs(a - b).max() <= 1e-3 * np.abs(a).max() + 1e-6, name

def test_roundtrip_same_logits(smol_roundtrip):
    src, _, out = smol_roundtrip
    m0, m1 = load(src), load(out)
    for prompt in ("The capital of France is", "def fib(n):\n    return fib(n - 1) +", "Once upon a time"):
        ids = m0.tokenizer.encode(prompt, add_special=False)
        a, b = m0.logits(ids), m1.logits(ids)
        assert cosines(a, b).min() >= 0.9999, prompt
        assert (a.argmax(-1) == b.argmax(-1)).all(), prompt

def test_roundtrip_same_token_ids(smol_roundtrip):
    src, _, out = smol_roundtrip
    t0, t1 = llmbook.Tokenizer.from_gguf(GGUFFile(src)), llmbook.Tokenizer.from_gguf(GGUFFile(out))
    for s in STRINGS:
        for parse_special in (False, True):
            assert t0.encode(s, add_special=True, parse_special=parse_special) == \
                   t1.encode(s, add_special=True, parse_special=parse_special), s
        assert t1.decode(t1.encode(s, add_special=False)) == t0.decode(t0.encode(s, add_special=False))

def test_tokenizers_package_agrees(smol_roundtrip):
    "The `tokenizers` library (a test oracle only, skipped when absent) reads our tokenizer.json to the same ids."
    tokenizers = pytest.importorskip("tokenizers")
    src, d, _ = smol_roundtrip
    ht = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    tok = llmbook.Tokenizer.from_gguf(GGUFFile(src))
    for s in STRINGS:
        assert ht.encode(s, add_special_tokens=False).ids == tok.encode(s, add_special=False, parse_special=True), s

def test_convert_quantized(smol_roundtrip, tmp_path):
    "Q8_0 from the checkpoint: every matrix Q8_0, vectors F32, and the model still the same model."
    src, d, _ = smol_roundtrip
    r = convert(d, tmp_path / "q8.gguf", "Q8_0")
    with GGUFFile(r.path) as g:
        assert g.metadata["general.file_type"] == 7
        assert {t.type for t in g.tensors.values()} == {"Q8_0", "F32"}
    m0, m1 = load(src), load(r.path)
    ids = m0.tokenizer.encode("The capital of France is", add_special=False)
    a, b = m0.logits(ids), m1.logits(ids)
    assert cosines(a, b).min() > 0.995 and a[-1].argmax() == b[-1].argmax()

def test_convert_matches_llamacpp(smol_roundtrip, tmp_path):
    "llama.cpp loads the converted files; its top logits and ours agree (fixture from tools/make_hf_fixtures.py)."
    fx = load_fixture("hf_llamacpp.json")
    _, d, f16 = smol_roundtrip
    files = {"F16": f16, "Q8_0": convert(d, tmp_path / "q8.gguf", "Q8_0").path}
    # F16: the same weights, so only the arithmetic differs (llama.cpp rounds activations to f16 for F16 weights);
    # Q8_0: llama.cpp also rounds activations to 8 bits, and SmolLM2 is sensitive to it (logits of 20-30 move by 0.5)
    tolerance = {"F16": (0.1, 0.05), "Q8_0": (1.0, 0.3)}     # type -> (max |logit difference|, margin that fixes argmax)
    for t, ref in fx["types"].items():
        m = load(files[t])
        max_diff, min_margin = tolerance[t]
        for case in ref["prompts"]:
            assert m.tokenizer.encode(case["prompt"], add_special=False) == case["ids"]
            logits = m.logits(case["ids"])
            for pos, (top, vals, margin) in enumerate(zip(case["top_ids"], case["top_logits"], case["margin"])):
                assert np.abs(logits[pos, top] - np.array(vals)).max() < max_diff, (t, case["prompt"], pos)
                if margin > min_margin: assert logits[pos].argmax() == top[0], (t, case["prompt"], pos)

# ---- tiny random checkpoints: both families, dtypes, shards ----

@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_random_model_roundtrip(tmp_path, arch):
    # Gemma's head is always tied (the converter drops an lm_head); the llama model has one of its own
    src = write_random_chat_model(tmp_path / "tiny.gguf", arch=arch, wtype="F32", n_layers=2, tied=arch == "gemma3")
    ref = load(src).logits(list(range(5, 25)))
    for dtype, tol in (("F32", 1e-4), ("F16", 2e-2), ("BF16", 2e-1)):
        d = export_hf(src, tmp_path / f"ckpt-{dtype}", dtype=dtype)
        assert {e.dtype for e in read_safetensors(d / "model.safetensors").values()} == {dtype}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")            # a random vocabulary: the pre-tokenizer hash is unknown
            out = convert(d, tmp_path / f"back-{dtype}.gguf", "F32").path
        logits = load(out).logits(list(range(5, 25)))
        assert np.abs(logits - ref).max() < tol * np.abs(ref).max(), (arch, dtype)

def test_unknown_pre_tokenizer_warns(tmp_path):
    src = write_random_chat_model(tmp_path / "tiny.gguf")
    d = export_hf(src, tmp_path / "ckpt")
    with pytest.warns(UserWarning, match="not in llama.cpp's table"):
        md, _ = read_hf(d)
    assert md["tokenizer.ggml.pre"] == "gpt-2"

def test_permutation_is_inverted():
    rng = np.random.default_rng(0)
    for n_head, rows in ((1, 8), (3, 48), (9, 576)):
        w = rng.normal(size=(rows, 5)).astype(np.float32)
        assert np.array_equal(_unpermute_qk(permute_qk(w, n_head), n_head), w)
        b = rng.normal(size=rows)
        assert np.array_equal(permute_qk(b, n_head), permute_qk(b[:, None], n_head)[:, 0])
    assert permute_qk(np.arange(8), 1).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]

def test_safetensors_format(tmp_path):
    w = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    bf = QTensor(llmbook.tensors.f32_to_bf16(w.reshape(6, 4)), GGMLType.BF16, (6, 4))
    p = write_safetensors(tmp_path / "a.safetensors", {"w": w, "h": w.astype(np.float16)}, {"format": "pt"})
    write_safetensors(tmp_path / "bf.safetensors", {"bf": bf})
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0 and json.loads(raw[8:8 + n])["__metadata__"] == {"format": "pt"}
    e = read_safetensors(p)
    assert np.array_equal(e["w"].tensor(), w) and e["h"].tensor().dtype == np.float16
    bf_back = read_safetensors(tmp_path / "bf.safetensors")["bf"]
    assert bf_back.dtype == "BF16" and np.array_equal(llmbook.dequantize(bf_back.tensor()).reshape(6, 4), w.reshape(6, 4))
    st = pytest.importorskip("safetensors.numpy")           # the reference reader and writer, when installed
    theirs = st.load_file(str(p))
    assert np.array_equal(theirs["w"], w) and theirs["h"].dtype == np.float16
    st.save_file({"x": w[0], "y": w[1].astype(np.float16)}, str(tmp_path / "b.safetensors"))
    e = read_safetensors(tmp_path / "b.safetensors")
    assert np.array_equal(e["x"].tensor(), w[0]) and np.array_equal(e["y"].tensor(), w[1])

def test_sharded_checkpoint(tmp_path):
    src = write_random_chat_model(tmp_path / "tiny.gguf")
    d = export_hf(src, tmp_path / "ckpt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md0, t0 = read_hf(d)
    entries = read_safetensors(d / "model.safetensors")
    names = sorted(entries)
    shards = {f"model-0000{k + 1}-of-00002.safetensors": names[k::2] for k in range(2)}
    for shard, ns in shards.items(): write_safetensors(d / shard, {n: entries[n].tensor() for n in ns})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: s for s, ns in shards.items() for n in ns}}))
    del entries
    (d / "model.safetensors").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md1, t1 = read_hf(d)
    assert md0 == md1 and sorted(t0) == sorted(t1)
    for n in t0: assert np.array_equal(np.asarray(t0[n]), np.asarray(t1[n])), n
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(HFError, match=r"model-00002-of-00002\.safetensors is missing"):
        read_hf(d)

# ---- bad directories ----

@pytest.fixture
def tiny_ckpt(tmp_path):
    return export_hf(write_random_chat_model(tmp_path / "tiny.gguf"), tmp_path / "ckpt")

def test_missing_config(tiny_ckpt):
    (tiny_ckpt / "config.json").unlink()
    with pytest.raises(HFError, match=r"config\.json is missing"): read_hf(tiny_ckpt)

def test_unknown_architecture(tiny_ckpt):
    c = json.loads((tiny_ckpt / "config.json").read_text())
    c["architectures"] = ["MambaForCausalLM"]
    (tiny_ckpt / "config.json").write_text(json.dumps(c))
    with pytest.raises(HFError, match=r"config\.json: architecture 'MambaForCausalLM' is not supported; "
                                      r"llmbook converts LlamaForCausalLM.*Gemma3ForCausalLM"):
        read_hf(tiny_ckpt)

def test_missing_weights_and_tokenizer(tiny_ckpt):
    (tiny_ckpt / "tokenizer.json").unlink()
    with pytest.raises(HFError, match=r"tokenizer\.json is missing"): read_hf(tiny_ckpt)
    (tiny_ckpt / "model.safetensors").unlink()
    with pytest.raises(HFError, match=r"model\.safetensors is missing"): read_hf(tiny_ckpt)
    with pytest.raises(HFError, match="is not a directory"): read_hf(tiny_ckpt / "nope")

def test_unsupported_dtype(tiny_ckpt):
    p = tiny_ckpt / "model.safetensors"
    entries = read_safetensors(p)
    tensors = {n: e.tensor() for n, e in entries.items()}
    del entries
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    name = "model.layers.0.mlp.up_proj.weight"
    header[name]["dtype"] = "I16"                          # same size as F16: only the declared type changes
    head = json.dumps(header).encode(); head += b" " * (-(len(head) + 8) % 8)
    p.write_bytes(len(head).to_bytes(8, "little") + head + raw[8 + n:])
    with pytest.raises(HFError, match=r"model\.safetensors: tensor 'model\.layers\.0\.mlp\.up_proj\.weight' is I16; "
                                      r"llmbook reads F32, F16 and BF16"):
        read_hf(tiny_ckpt)
    header[name]["data_offsets"][1] += 4                    # a header that does not fit the data
    head = json.dumps(header).encode()
    p.write_bytes(len(head).to_bytes(8, "little") + head + raw[8 + n:])
    with pytest.raises(HFError, match="does not fit"): read_hf(tiny_ckpt)

# ---- hub names and load_source ----

def fake_hub_cache(home: Path, repo: str, files: dict, commit: str = "a" * 40) -> Path:
    "The layout huggingface_hub keeps: blobs/ by hash, snapshots/<commit>/ of links to them, refs/main."
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True, exist_ok=True); (root / "refs" / "main").write_text(commit)
    for path, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True); blob.write_bytes(data)
        link = root / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True); link.symlink_to(os.path.relpath(blob, link.parent))
    return root

def test_pick_gguf_like_llama_cpp():
    files = ["README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-q6_k.gguf", "mmproj-m-f16.gguf",
             "big/m-Q5_K_M-00002-of-00003.gguf", "big/m-Q5_K_M-00001-of-00003.gguf"]
    assert _pick_gguf(files) == "m-Q4_K_M.gguf"
    assert _pick_gguf(files, "Q6_K") == "m-q6_k.gguf"
    assert _pick_gguf(files, "q5_k_m") == "big/m-Q5_K_M-00001-of-00003.gguf"
    assert _pick_gguf(files, "IQ2_XS") is None
    assert _pick_gguf(["m-f16.gguf", "mmproj.gguf"]) == "m-f16.gguf"
    assert _pick_gguf(["README.md"]) is None

@pytest.fixture
def hub_home(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    tiny = write_random_chat_model(tmp_path / "tiny.gguf").read_bytes()
    fake_hub_cache(tmp_path / "hf_home", "someone/Tiny-GGUF",
                   {"tiny-Q8_0.gguf": tiny, "tiny-Q4_K_M.gguf": tiny + b"", "README.md": b"# tiny\n"})
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf_home"

def test_resolve_hub_offline(hub_home):
    p = _resolve_hub("someone/Tiny-GGUF:Q8_0")
    assert p.name == "tiny-Q8_0.gguf" and "snapshots" in p.parts and GGUFFile(p).metadata["general.architecture"] == "llama"
    assert _resolve_hub("someone/Tiny-GGUF").name == "tiny-Q4_K_M.gguf"          # Q4_K_M by default
    with pytest.raises(HubError, match=r"no GGUF file for Q2_K; its GGUF files: tiny-Q4_K_M\.gguf, tiny-Q8_0\.gguf"):
        _resolve_hub("someone/Tiny-GGUF:Q2_K")
    with pytest.raises(HubError, match=r"HF_HUB_OFFLINE is set and 'someone/Other-GGUF' is not in the hub cache .*hf download someone/Other-GGUF"):
        _resolve_hub("someone/Other-GGUF")
    assert load_source("someone/Tiny-GGUF:Q8_0") == p

def test_resolve_hub_unreachable(hub_home, tmp_path):
    "A hub that does not answer (a closed local port): the cached file, or an error saying what to download."
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    env.pop("HF_HUB_OFFLINE")
    code = ("import sys; from llmbook.hf import _resolve_hub, HubError\n"
            "print(_resolve_hub('someone/Tiny-GGUF:Q8_0'))\n"
            "try: _resolve_hub('someone/Other-GGUF:Q8_0')\nexcept HubError as e: print('HubError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = r.stdout.strip().splitlines()[:2]
    assert first.endswith("tiny-Q8_0.gguf")
    assert "could not be reached" in second and "hf download someone/Other-GGUF" in second

def test_load_source(tmp_path, monkeypatch, tiny_ckpt):
    monkeypatch.setenv("LLMBOOK_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    assert load_source(gguf) == gguf                                   # a GGUF file as it is
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = load_source(tiny_ckpt)                                     # a directory: converted into the cache
    assert p == _converted_path(tiny_ckpt) and p.parent == tmp_path / "cache" / "hf" and p.is_file()
    mtime = p.stat().st_mtime_ns
    assert load_source(str(tiny_ckpt)) == p and p.stat().st_mtime_ns == mtime      # converted once
    assert _converted_path(tiny_ckpt, "Q8_0") != p
    c = tiny_ckpt / "config.json"
    c.write_text(c.read_text() + "\n")                                 # a changed checkpoint: a new key
    assert _converted_path(tiny_ckpt) != p
    assert load(p).logits([5, 6, 7]).shape == (3, GGUFFile(gguf).tensors["token_embd.weight"].shape[0])
    with pytest.raises(FileNotFoundError, match="no such file or directory"): load_source(tmp_path / "missing.gguf")

@pytest.mark.parametrize("arch", ["Qwen2ForCausalLM", "Qwen3ForCausalLM"])
def test_qwen_checkpoints(tmp_path, tiny_ckpt, arch):
    "Qwen 2 (q/k/v biases) and Qwen 3 (q/k norms): their own GGUF keys and names, no Q/K permutation (NeoX RoPE)."
    c = json.loads((tiny_ckpt / "config.json").read_text())
    c["architectures"], c["head_dim"] = [arch], 16
    (tiny_ckpt / "config.json").write_text(json.dumps(c))
    e = {n: np.array(x.tensor()) for n, x in read_safetensors(tiny_ckpt / "model.safetensors").items()}
    extra = {"q_proj.bias": 64, "k_proj.bias": 32, "v_proj.bias": 32} if arch.startswith("Qwen2") else {"q_norm.weight": 16, "k_norm.weight": 16}
    for i in range(c["num_hidden_layers"]):
        for n, size in extra.items(): e[f"model.layers.{i}.self_attn.{n}"] = np.arange(size, dtype=np.float16)
    write_safetensors(tiny_ckpt / "model.safetensors", e)
    md, tensors = read_hf(tiny_ckpt)
    a = md["general.architecture"]
    assert a == arch[:5].lower() and md[f"{a}.attention.key_length"] == 16 and f"{a}.rope.dimension_count" not in md
    assert np.array_equal(tensors["blk.1.attn_q.weight"], e["model.layers.1.self_attn.q_proj.weight"])
    if a == "qwen2": assert np.array_equal(tensors["blk.0.attn_q.bias"], np.arange(64))
    else: assert "blk.0.attn_q_norm.weight" in tensors and "blk.0.attn_k_norm.weight" in tensors
    out = convert(tiny_ckpt, tmp_path / "q.gguf").path
    with GGUFFile(out) as g:
        assert g.tensors["blk.0.attn_q.weight"].type == "F16" and g.tensors["blk.0.attn_k_norm.weight" if a == "qwen3"
                                                                               else "blk.0.attn_k.bias"].type == "F32"

def test_llmbook_load_takes_directories_and_hub_names(tmp_path, monkeypatch, tiny_ckpt, hub_home):
    "The one loader: a GGUF file, a checkpoint directory and a hub name all open through `llmbook.load`."
    import llmbook
    monkeypatch.setenv("LLMBOOK_CACHE", str(tmp_path / "cache"))
    ids = [5, 6, 7, 8]
    ref = llmbook.load(tmp_path / "tiny.gguf", kernels="float").logits(ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                  # a random vocabulary: unknown pre-tokenizer hash
        from_dir = llmbook.load(tiny_ckpt, kernels="float").logits(ids)
    assert np.abs(from_dir - ref).max() < 2e-2 * np.abs(ref).max()        # F16 on the way through the checkpoint
    assert llmbook.load("someone/Tiny-GGUF:Q8_0").logits(ids).shape == ref.shape
    with pytest.raises(FileNotFoundError, match="no model file"): llmbook.load(tmp_path / "missing.gguf")

def test_cli_convert(tmp_path, tiny_ckpt, capsys):
    "`llmbook convert DIR OUT.gguf --type Q8_0` writes a file llmbook loads; a bad directory is a one-line error, status 1."
    from llmbook.cli import main
    out = tmp_path / "out.gguf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["convert", str(tiny_ckpt), str(out), "--type", "Q8_0", "--quiet"]) == 0
    assert GGUFFile(out).tensors["blk.0.attn_q.weight"].type == "Q8_0"
    assert main(["convert", str(tmp_path / "nowhere"), str(tmp_path / "x.gguf")]) == 1
    assert "llmbook convert: error:" in capsys.readouterr().err and not (tmp_path / "x.gguf").exists()

def test_hub_name_offline_fails_fast_and_uses_the_cache_first(hub_home):
    "No HF_HUB_OFFLINE, no network (a closed port as the hub): the cached file at once, else one clear error at once."
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE")
    code = ("import time; from llmbook.hf import _resolve_hub, HubError\n"
            "t = time.perf_counter(); print(_resolve_hub('someone/Tiny-GGUF:Q8_0').name, time.perf_counter() - t)\n"
            "t = time.perf_counter()\n"
            "try: _resolve_hub('someone/Other-GGUF:Q8_0')\nexcept HubError as e: print(time.perf_counter() - t, 'HubError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    (name, cached_s), second = r.stdout.split("\n")[0].split(), r.stdout.split("\n")[1]
    assert name == "tiny-Q8_0.gguf" and float(cached_s) < 1.0                     # from the cache, no network asked
    assert float(second.split()[0]) < 5.0 and "could not be reached" in second and "hf download someone/Other-GGUF" in second
    # the command: one line, at once, and no "done" for a load that failed
    r = subprocess.run([str(Path(sys.executable).parent / "llmbook"), "generate", "-m", "someone/Other-GGUF:Q8_0", "hi"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "could not be reached" in r.stderr and "done" not in r.stderr and "Traceback" not in r.stderr
