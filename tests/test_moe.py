"""Mixture of experts (issue 28, nbs/3_19_moe.ipynb): Qwen3-MoE's, Mixtral's and OLMoE's logits against llama.cpp's on the random-weight files of
tests/fixtures/family_qwen3moe_*.json (rebuilt by tools/family_models.py, sha256 checked), on the reference engine
and on both kernel sets; the kernels' MoE plan against the numpy block; decode reads only the chosen experts and
prefill runs each chosen expert once; one answer whatever the batch; bad files refused at load; the CLI and chat."""
import base64, hashlib, json, sys
from pathlib import Path
import numpy as np
import pytest
import llmbook
from llmbook import moe, families
from llmbook.gguf import GGUFFile, GGUFWriter
from llmbook.model import Model, UnsupportedModelError
from llmbook.engine import KernelEngine
from llmbook.int8 import host_features
from llmbook.tensors import QTensor

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from family_models import write_family_model  # noqa: E402

HAS_AVX2 = "avx2" in host_features()
KERNELS = ["float", pytest.param("avx2", marks=pytest.mark.skipif(not HAS_AVX2, reason="this CPU has no AVX2"))]
ENGINES = ["reference"] + KERNELS
# A router whose k-th and (k+1)-th logits are closer than this may choose either side under llama.cpp's rounding
# (8-bit activations, f16 KV cache): measured on family_qwen3moe_Q4_K_M, position 26, layer 1, a gap of 0.014 went
# the other way (nbs/3_19_moe.ipynb shows that taking the other expert there gives cosine 0.99992 instead of 0.99896).
ROUTER_TIE = 0.02

CASES = ["qwen3moe", "mixtral", "olmoe"]   # Mixtral: a llama file with llama.expert_count; OLMoE: whole-row q/k norms

def fixture(case, wtype):
    return json.loads((FIXTURES / f"family_{case}_{wtype}.json").read_text())

@pytest.fixture(scope="module")
def fixture_file(tmp_path_factory):
    made = {}
    def make(case, wtype):
        if (case, wtype) not in made:
            fx = fixture(case, wtype)
            path = write_family_model(tmp_path_factory.mktemp("moe") / f"{case}_{wtype}.gguf", **fx["writer"])
            assert hashlib.sha256(path.read_bytes()).hexdigest() == fx["model_sha256"], "the writer no longer makes the fixture's file"
            made[case, wtype] = path
        return made[case, wtype]
    return make

def engine_of(name):
    return None if name == "reference" else (lambda model: KernelEngine(model, kernels=name))

def router_ties(path, ids, tie: float = ROUTER_TIE) -> np.ndarray:
    "Positions where some layer's router has its k-th and (k+1)-th logits within `tie` (reference engine)."
    m = Model(GGUFFile(path), n_ctx=256, families=families.FAMILIES + moe.FAMILIES)   # gpt-oss's YaRN: the families chapter's
    trace = []
    for lw in m.weights.layers: lw.moe.trace = trace
    m.logits(ids)
    tied = np.zeros(len(ids), bool)
    for top, _, logits in trace:
        s = np.sort(logits, -1)[:, ::-1]
        k = top.shape[1]
        tied |= (s[:, k - 1] - s[:, k]) < tie
    return tied

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("wtype", ["F16", "Q4_K_M"])
@pytest.mark.parametrize("case", CASES)
def test_moe_logits_match_llamacpp(fixture_file, case, wtype, engine):
    "Cosine >= 0.9999 (F16, every position) / 0.999 (Q4_K_M, positions without a router near-tie); top-1 >= 0.98 where llama.cpp's margin >= 0.5."
    fx, path = fixture(case, wtype), fixture_file(case, wtype)
    ids = fx["prompt"] + fx["continuation"]
    ours = Model(GGUFFile(path), n_ctx=256, engine=engine_of(engine), families=moe.FAMILIES).logits(ids)
    ref = np.frombuffer(base64.b64decode(fx["logits_f16"]), np.float16).astype(np.float32).reshape(len(ids), -1)
    cos = (ours * ref).sum(-1) / np.linalg.norm(ours, axis=-1) / np.linalg.norm(ref, axis=-1)
    # F16: every position. Quantized: llama.cpp's 8-bit activations may flip a router near-tie (qwen3moe Q4_K_M: 5
    # of its 40 positions have a gap under ROUTER_TIE in some layer, and one of them flipped)
    tied = router_ties(path, ids) if wtype != "F16" else np.zeros(len(ids), bool)
    assert tied.sum() <= 6, f"{tied.sum()} positions with router near-ties: the fixture checks too little"
    floor = 0.9999 if wtype == "F16" else 0.999
    assert cos[~tied].min() >= floor, (case, wtype, engine, cos.round(5))
    assert cos.min() >= 0.995, (case, wtype, engine, cos.round(5))    # even across a flipped expert
    clear = np.array(fx["top2_margin"]) >= 0.5
    top1 = (ours.argmax(-1) == np.array(fx["argmax"]))[clear].mean()
    assert top1 >= 0.98, (case, wtype, engine, top1)

@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_moe_greedy_matches_llamacpp(fixture_file, case, kernels):
    "llama.cpp's 16 greedy tokens on the F16 file through llmbook.load, up to its first own near-tie (gap < 1e-2, as test_families)."
    fx = fixture(case, "F16")
    n = next((i for i, m in enumerate(fx["margins"]) if m < 1e-2), len(fx["margins"]))
    assert n >= 8, "llama.cpp's continuation has an early near-tie: the fixture checks too little"
    m = llmbook.load(fixture_file(case, "F16"), n_ctx=256, kernels=kernels)
    out = m.generate(fx["prompt"], max_tokens=len(fx["continuation"]), temperature=0.0, ignore_eos=True)
    assert out.tokens[:n] == fx["continuation"][:n]

# ---------------------------------------------------------------- the kernels' plan
@pytest.fixture(scope="module")
def q8_file(tmp_path_factory):
    "A small Q8_0 qwen3moe (32 experts, 4 used) with SmolLM2's tokenizer and chat template."
    return moe.write_qwen3moe(tmp_path_factory.mktemp("moe") / "q8.gguf", n_layers=2, n_expert=32, n_expert_used=4,
                              wtype="Q8_0", seed=3)

@pytest.mark.parametrize("kernels", KERNELS)
def test_plan_matches_the_numpy_block(q8_file, kernels):
    mw = Model(GGUFFile(q8_file), families=moe.FAMILIES).weights.layers[1].moe
    h = np.random.default_rng(0).standard_normal((7, 256)).astype(np.float32)
    want = mw.forward(h)
    plan = mw.plan(kernels)
    got, one = np.empty_like(h), np.empty((1, 256), np.float32)
    plan(h, got); plan(h[2:3], one)
    scale = np.abs(want).max()
    tol = 1e-5 if kernels == "float" else 3e-2     # float32 rounding; 8-bit activations (measured 1.3e-2 in nbs/moe)
    assert np.abs(got - want).max() / scale < tol and np.abs(one[0] - want[2]).max() / scale < tol

class Refuse:
    "Stands in for an expert that must not be read."
    def matvec(self, *a): raise AssertionError("an expert that was not chosen was read")
    matmul = matvec

def test_decode_reads_only_the_chosen_experts(q8_file):
    mw = Model(GGUFFile(q8_file), families=moe.FAMILIES).weights.layers[0].moe
    plan = mw.plan("float")
    x = np.random.default_rng(1).standard_normal((1, 256)).astype(np.float32)
    buffers = {}                                  # a workspace's (chapter 15): the decode buffers, made at the first call
    want = np.empty_like(x); plan(x, want, buffers)
    (b,) = buffers.values()
    chosen = set(b["top"][0].tolist())
    assert len(chosen) == 4
    assert plan.decode_bytes == plan.router.nbytes + 4 * (plan.nbytes - plan.router.nbytes) // 32
    for e in range(plan.n_expert):
        if e not in chosen: plan.experts[e] = (Refuse(), Refuse())
    got = np.empty_like(x); plan(x, got, buffers)
    assert np.array_equal(got, want)

def test_prefill_runs_each_chosen_expert_once(q8_file):
    mw = Model(GGUFFile(q8_file), families=moe.FAMILIES).weights.layers[0].moe
    plan = mw.plan("float")
    X = np.random.default_rng(2).standard_normal((20, 256)).astype(np.float32)
    calls = {}
    def counted(e, proj):
        class Counted:
            nbytes = proj.nbytes
            def matmul(self, A, out):
                calls[e] = calls.get(e, 0) + 1
                proj.matmul(A, out)
        return Counted()
    plan.experts = [(counted(e, g), d) for e, (g, d) in enumerate(plan.experts)]
    out = np.empty_like(X); plan(X, out)
    top, _ = moe.route(moe.linear(X, mw.router), 4)     # the router's choices, in numpy
    assert set(calls) == set(np.unique(top).tolist()) and set(calls.values()) == {1}

@pytest.mark.parametrize("kernels", KERNELS)
def test_one_answer_whatever_the_batch(q8_file, kernels):
    "A token's logits are the same bits in one batch, one at a time, or in chunks (deterministic engine)."
    m = llmbook.load(q8_file, n_ctx=64, kernels=kernels, deterministic=True)
    ids = np.random.default_rng(3).integers(0, 49152, 12)
    whole = m.logits(ids)
    s = m.session()
    steps = np.stack([s.extend([int(t)]) for t in ids])
    s2 = m.session(); s2.extend(ids[:5]); last = s2.extend(ids[5:])
    assert np.array_equal(whole, steps) and np.array_equal(whole[-1], last)

# ---------------------------------------------------------------- bad files
def rewrite(src, dst, meta=None, drop=(), cut=None):
    with GGUFFile(src) as g:
        w = GGUFWriter(dst, arch=g.metadata["general.architecture"])
        for k, v in g.metadata.items():
            if k not in w.metadata and v is not None and not (meta and k in meta and meta[k] is None):
                w.add(k, (meta or {}).get(k, v), g.metadata_types[k])
        for n in g.tensors:
            if n in drop: continue
            t = g.qtensor(n)
            if n == cut: t = QTensor(t.data[:t.data.size // 2], t.type, (t.shape[0] // 2,) + t.shape[1:])
            w.add_tensor(n, t)
        return w.write()

@pytest.mark.parametrize("change, words", [
    (dict(meta={"qwen3moe.expert_used_count": 64}), ["expert_used_count 64", "expert_count 32"]),
    (dict(meta={"qwen3moe.expert_count": None}), ["qwen3moe.expert_count", "None"]),
    (dict(meta={"qwen3moe.expert_count": 16}), ["ffn_gate_inp.weight has shape (32, 256)", "(16, 256)"]),
    (dict(cut="blk.1.ffn_down_exps.weight"), ["blk.1.ffn_down_exps.weight has shape (16, 256, 256)", "(32, 256, 256)"]),
    (dict(drop=("blk.0.ffn_up_exps.weight",)), ["layer 0 lacks ffn_up_exps.weight"]),
])
def test_bad_files_are_refused_at_load(q8_file, tmp_path, change, words):
    bad = rewrite(q8_file, tmp_path / "bad.gguf", **change)
    with pytest.raises(UnsupportedModelError) as e: llmbook.load(bad, n_ctx=32)
    for w in words: assert w in str(e.value), str(e.value)

@pytest.mark.parametrize("case", CASES)
def test_model_without_families_says_how_to_open_it(fixture_file, case):
    "Chapter 07's Model runs a mixture of experts only with the families it is given; without, the error says how to open the file."
    path = fixture_file(case, "F16")
    with pytest.raises(UnsupportedModelError) as e: Model(GGUFFile(path))
    for w in ("mixture-of-experts", "load(path)", "families=llmbook.moe.FAMILIES"): assert w in str(e.value), str(e.value)
    m = Model(GGUFFile(path), families=moe.FAMILIES)
    assert m.config.experts.n_expert == fixture(case, "F16")["writer"]["n_expert"]
    with GGUFFile(path) as g:                     # the same file under an architecture no family runs
        w = GGUFWriter(path.with_name("other_arch.gguf"), arch="deepseek2")
        for k, v in g.metadata.items():
            if k not in w.metadata: w.add(k, v, g.metadata_types[k])
        for n in g.tensors: w.add_tensor(n, g.qtensor(n))
        other = w.write()
    with pytest.raises(UnsupportedModelError, match="'deepseek2' is not supported; llmbook runs llama, .*qwen3moe"):
        Model(GGUFFile(other), families=moe.FAMILIES)

# ---------------------------------------------------------------- the CLI and chat
def test_mixtral_file_is_llama_with_experts(fixture_file):
    "A llama file with llama.expert_count runs Mixtral's family; the dense llama fixture still runs chapter 07's block."
    m = llmbook.load(fixture_file("mixtral", "F16"), n_ctx=64)
    assert m.config.arch == "llama" and not m.config.rope_neox and m.config.experts.n_expert == 8
    assert all(lw.moe is not None and lw.ffn_gate is None for lw in m.weights.layers)

def test_cli_and_chat_run_qwen3moe(q8_file, capsys):
    from llmbook import cli
    assert cli.main(["inspect", str(q8_file), "--key", "general.architecture"]) == 0
    assert json.loads(capsys.readouterr().out) == "qwen3moe"
    assert cli.main(["generate", "--model", str(q8_file), "--ctx", "128", "--max-tokens", "6", "--temperature", "0",
                     "--ignore-eos", "the cat sat"]) == 0
    printed = capsys.readouterr().out
    m = llmbook.load(q8_file, n_ctx=128)
    want = m.generate("the cat sat", max_tokens=6, temperature=0.0, ignore_eos=True)
    assert printed.rstrip("\n") == str(want) and len(want.tokens) == 6
    reply = m.chat([{"role": "user", "content": "Hi"}], max_tokens=5, temperature=0.0)
    assert isinstance(str(reply), str) and len(reply.tokens) >= 1

def test_serve_runs_qwen3moe(q8_file):
    "The OpenAI-style server (chapter 27) on a qwen3moe file: chat and completion, greedy, as the API gives."
    pytest.importorskip("fastapi"); pytest.importorskip("httpx")
    from fastapi.testclient import TestClient
    from llmbook.serve import make_app
    m = llmbook.load(q8_file, n_ctx=128, deterministic=True)
    client = TestClient(make_app(m, n_slots=1, n_ctx=128))
    r = client.post("/v1/completions", json={"model": "m", "prompt": "the cat", "max_tokens": 5, "temperature": 0})
    assert r.status_code == 200, r.text
    want = m.generate("the cat", max_tokens=5, temperature=0.0)
    assert r.json()["choices"][0]["text"] == str(want)
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                                                  "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1, r.text

# ---------------------------------------------------------------- OLMoE
def test_olmoe_layers_and_refusals(fixture_file, tmp_path):
    "OLMoE's layers carry whole-row q/k norms (n_embd long) and unrenormalized gate weights; a broken file is refused at load."
    path = fixture_file("olmoe", "F16")
    m = Model(GGUFFile(path), families=moe.FAMILIES)
    assert m.config.rope_neox and m.config.experts.norm is False and m.config.experts.n_ff_exp == 256
    lw = m.weights.layers[0]
    assert lw.attn_q_norm.shape == (256,) and lw.attn_k_norm.shape == (256,)    # n_heads * head_dim: all heads at once
    h = np.random.default_rng(4).standard_normal((3, 256)).astype(np.float32)
    lw.moe.trace = []; lw.moe.forward(h)
    top, w, _ = lw.moe.trace[0]
    assert (w.sum(-1) < 1).all()                  # the chosen experts' probabilities, as they are
    for change, words in [(dict(drop=("blk.1.attn_k_norm.weight",)), "blk.1.attn_k_norm.weight is missing"),
                          (dict(meta={"olmoe.expert_count": 8}), "ffn_gate_inp.weight has shape (16, 256)"),
                          (dict(drop=("blk.0.ffn_gate_exps.weight",)), "layer 0 lacks ffn_gate_exps.weight")]:
        bad = rewrite(path, tmp_path / "bad.gguf", **change)
        with pytest.raises(UnsupportedModelError) as e: llmbook.load(bad, n_ctx=32)
        assert words in str(e.value), str(e.value)

def test_cli_runs_olmoe(fixture_file, capsys):
    from llmbook import cli
    path = fixture_file("olmoe", "Q4_K_M")
    assert cli.main(["inspect", str(path), "--key", "general.architecture"]) == 0
    assert json.loads(capsys.readouterr().out) == "olmoe"
    assert cli.main(["generate", "--model", str(path), "--ctx", "64", "--max-tokens", "5", "--temperature", "0",
                     "--ignore-eos", "the cat"]) == 0
    want = llmbook.load(path, n_ctx=64).generate("the cat", max_tokens=5, temperature=0.0, ignore_eos=True)
    assert capsys.readouterr().out.rstrip("\n") == str(want) and len(want.tokens) == 5

# ---------------------------------------------------------------- MXFP4 (gpt-oss's experts)
def test_mxfp4_dequantize_is_ggmls():
    "MXFP4 blocks (random bytes, every exponent 0..255, subnormal scales included) dequantize bit for bit as ggml's."
    fx = json.loads((FIXTURES / "family_mxfp4_ggml.json").read_text())
    raw = np.frombuffer(base64.b64decode(fx["blocks"]), np.uint8)
    want = np.frombuffer(base64.b64decode(fx["values_f32"]), np.float32)
    got = llmbook.dequantize(QTensor(raw, llmbook.GGMLType.MXFP4, (fx["n_blocks"] * 32,)))
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()

# ---------------------------------------------------------------- YaRN (issue 28: any family declaring it)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("wtype", ["F16", "Q4_K_M"])
def test_yarn_logits_match_llamacpp(fixture_file, wtype, engine):
    "A qwen3 file with rope.scaling.type yarn (factor 4, original context 256): cosine and top-1 as the families' bars."
    fx, path = fixture("qwen3_yarn", wtype), fixture_file("qwen3_yarn", wtype)
    ids = fx["prompt"] + fx["continuation"]
    m = Model(GGUFFile(path), n_ctx=256, engine=engine_of(engine), families=families.FAMILIES)
    assert m.config.rope_yarn[:2] == (4.0, 256) and abs(m.config.rope_mscale - (1 + 0.1 * np.log(4.0))) < 1e-12
    ours = m.logits(ids)
    ref = np.frombuffer(base64.b64decode(fx["logits_f16"]), np.float16).astype(np.float32).reshape(len(ids), -1)
    cos = (ours * ref).sum(-1) / np.linalg.norm(ours, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert cos.min() >= (0.9999 if wtype == "F16" else 0.999), (wtype, engine, cos.round(5))
    clear = np.array(fx["top2_margin"]) >= 0.5
    assert (ours.argmax(-1) == np.array(fx["argmax"]))[clear].mean() >= 0.98

def test_yarn_factor_must_stretch(fixture_file, tmp_path):
    bad = rewrite(fixture_file("qwen3_yarn", "F16"), tmp_path / "y.gguf", meta={"qwen3.rope.scaling.factor": 0.5})
    with pytest.raises(UnsupportedModelError, match="YaRN needs rope.scaling.factor > 1"): Model(GGUFFile(bad), families=families.FAMILIES)

# ---------------------------------------------------------------- one forward pass for every family
@pytest.mark.parametrize("case, wtype", [("olmoe", "Q4_K_M"), ("gptoss", "MXFP4")])
def test_slots_give_each_request_its_answer_alone(fixture_file, case, wtype):
    """Four sessions of an OLMoE or a gpt-oss file (whole-row q/k norms; sinks and biased MXFP4 experts) generating at
    once through the server's batcher (chapter 27), prompts chunked and passes shared: each gets the tokens and
    logprobs it gets alone. Their extras are data in chapter 07's and chapter 15's one forward pass, so this holds
    exactly, as for the llama families (tests/test_serve_batching.py)."""
    from concurrent.futures import ThreadPoolExecutor
    from llmbook.generate import Session
    from llmbook.scheduler import SlotPool
    model = llmbook.load(fixture_file(case, wtype), n_ctx=256, deterministic=True)
    rng = np.random.default_rng(5)
    jobs = [(rng.integers(0, model.config.n_vocab, n).tolist(), dict(max_tokens=m, temperature=t, seed=s))
            for n, m, t, s in [(3, 12, 0.0, 0), (40, 8, 0.8, 1), (17, 10, 1.2, 2), (1, 16, 0.0, 0)]]
    def run(session, ids, kw):
        c = session.generate(ids, logprobs=2, ignore_eos=True, **kw)
        return c.tokens, c.logprobs
    alone = [run(Session(model, 256), *job) for job in jobs]
    pool = SlotPool(model, n_slots=4, n_ctx=256, n_batch=16)
    def in_slot(i):
        s = pool.slots[i].session
        try: return run(s, *jobs[i])
        finally: pool.batcher.leave(s.cache)
    with ThreadPoolExecutor(4) as ex: together = list(ex.map(in_slot, range(4)))
    assert together == alone
    assert max(len(step) for step in pool.batcher.steps) >= 2          # the slots shared passes
