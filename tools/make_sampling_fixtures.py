"""Make tests/fixtures/sampling.json: what llama.cpp's sampler chain picks, step by step, with a fixed seed.

Run with a Python that has llama-cpp-python (dev only, never a dependency of llmbook):

    $REFPY tools/make_sampling_fixtures.py [tests/fixtures/sampling.json] [--smollm2 PATH.gguf]

With --smollm2 it also writes tests/fixtures/sampling_smollm2.json: generations on the real model through the same
chain (logit bias and penalties included) with a seed, token by token (see `run_model`).

No model is needed: the chain (penalties -> top-k -> top-p -> min-p -> temperature -> dist), the order
llama.cpp's common/sampling.cpp builds by default, is applied to made-up logits. The logits come from a
small integer hash (`case_logits` in tests/sampling_cases.py, shared with the test) so the JSON stays small; their
sha256 is stored so the test knows it rebuilt the same numbers.
"""
import ctypes, hashlib, json, sys
import numpy as np
import llama_cpp as L
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sampling_cases import case_logits  # noqa: E402

def step_logits(base, step, roll):
    "The logits of step `step`: the base vector rotated, so each step sees a different winner."
    return np.roll(base, roll * step)

CASES = [  # name, vocab, salt, scale, settings, prompt (history before the first step), steps
    dict(name="defaults", n_vocab=1000, salt=1, scale=2.0, settings={}, prompt=[], steps=40),
    dict(name="hot_top_p_only_big_vocab", n_vocab=32000, salt=2, scale=1.5,
         settings=dict(temperature=1.5, top_k=0, top_p=0.9, min_p=0.0), prompt=[], steps=25),
    dict(name="min_p_only_unsorted", n_vocab=4000, salt=3, scale=2.5,
         settings=dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.1), prompt=[], steps=30),
    dict(name="penalties", n_vocab=500, salt=4, scale=1.0,
         settings=dict(repeat_penalty=1.3, frequency_penalty=0.2, presence_penalty=0.5, penalty_last_n=16,
                       temperature=0.7, top_k=20, top_p=0.9, min_p=0.02),
         prompt=[3, 17, 17, 250, 499, 0, 3], steps=40, roll=0),
    dict(name="greedy_with_penalties", n_vocab=300, salt=5, scale=1.0,
         settings=dict(temperature=0.0, repeat_penalty=1.5, penalty_last_n=8), prompt=[1, 2, 3], steps=30, roll=0),
    dict(name="small_k_min_keep", n_vocab=200, salt=6, scale=4.0,
         settings=dict(temperature=1.2, top_k=5, top_p=0.5, min_p=0.3, min_keep=3), prompt=[], steps=30),
    dict(name="pure_dist", n_vocab=32000, salt=7, scale=1.0,
         settings=dict(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0), prompt=[], steps=25),
    dict(name="k200_bucket_sort", n_vocab=50000, salt=8, scale=2.0,
         settings=dict(temperature=1.1, top_k=200, top_p=0.98, min_p=0.0, seed=12345), prompt=[], steps=25),
    dict(name="seed_42_defaults_penalized", n_vocab=2000, salt=9, scale=2.0,
         settings=dict(seed=42, repeat_penalty=1.1, penalty_last_n=64), prompt=[5, 6, 7], steps=40),
    dict(name="logit_bias_ban_and_boost", n_vocab=700, salt=10, scale=2.0,
         settings=dict(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0, seed=7,
                       logit_bias=[[i, -float("inf")] for i in range(0, 700, 3)] + [[1, 3.0], [500, 5.0], [250, -2.5]]),
         prompt=[], steps=30),
    dict(name="logit_bias_with_penalties_all_history", n_vocab=400, salt=11, scale=1.0,
         settings=dict(temperature=0.8, top_k=30, presence_penalty=0.8, frequency_penalty=0.3, penalty_last_n=-1,
                       logit_bias=[[17, 4.0], [18, -float("inf")], [19, 1.5]], seed=3),
         prompt=[17, 17, 19], steps=40, roll=0),
    dict(name="greedy_logit_bias_penalties", n_vocab=300, salt=12, scale=1.0,
         settings=dict(temperature=0.0, frequency_penalty=0.6, penalty_last_n=4, logit_bias=[[0, 1.0], [1, -1.0]]),
         prompt=[2], steps=30, roll=0),
]
ROLL = 7  # default rotation per step; roll=0 keeps the logits fixed so only the penalties move the winner

DEFAULTS = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, min_keep=1, repeat_penalty=1.0,
                frequency_penalty=0.0, presence_penalty=0.0, penalty_last_n=64, seed=0, logit_bias=[])

def make_chain(n_vocab, s):
    "llama.cpp's default chain for these settings, as common/sampling.cpp builds it."
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    add = lambda smpl: L.llama_sampler_chain_add(chain, smpl)
    if s["logit_bias"]:                      # first in the chain, as common/sampling.cpp adds it
        biases = (L.llama_logit_bias * len(s["logit_bias"]))(*[L.llama_logit_bias(t, b) for t, b in s["logit_bias"]])
        add(L.llama_sampler_init_logit_bias(n_vocab, len(s["logit_bias"]), biases))
    last_n = s["penalty_last_n"] if s["penalty_last_n"] >= 0 else 4096   # -1 (whole history): common/ passes n_ctx
    add(L.llama_sampler_init_penalties(n_vocab, last_n, s["repeat_penalty"],
                                       s["frequency_penalty"], s["presence_penalty"]))
    add(L.llama_sampler_init_top_k(s["top_k"]))
    add(L.llama_sampler_init_top_p(s["top_p"], s["min_keep"]))
    add(L.llama_sampler_init_min_p(s["min_p"], s["min_keep"]))
    add(L.llama_sampler_init_temp(s["temperature"]))
    add(L.llama_sampler_init_dist(s["seed"]))
    return chain

def run_case(case):
    s = {**DEFAULTS, **case["settings"]}
    n = case["n_vocab"]
    base, roll = case_logits(n, case["salt"], case["scale"]), case.get("roll", ROLL)
    chain = make_chain(n, s)
    for t in case["prompt"]: L.llama_sampler_accept(chain, t)
    data = (L.llama_token_data * n)()
    steps = []
    for step in range(case["steps"]):
        logits = step_logits(base, step, roll)
        for i in range(n):
            data[i].id, data[i].logit, data[i].p = i, float(logits[i]), 0.0
        arr = L.llama_token_data_array(data=ctypes.cast(data, L.llama_token_data_p), size=n, selected=-1, sorted=False)
        L.llama_sampler_apply(chain, ctypes.byref(arr))
        token = data[arr.selected].id
        cands = sorted(((data[i].id, data[i].p) for i in range(arr.size)), key=lambda c: -c[1])
        live = [(i, p) for i, p in cands if p > 0]                # greedy leaves the losers at p = 0
        steps.append(dict(token=int(token), n_candidates=len(live),
                          top_ids=[int(i) for i, _ in live[:10]], top_probs=[round(float(p), 6) for _, p in live[:10]]))
        L.llama_sampler_accept(chain, token)
    L.llama_sampler_free(chain)
    return dict(name=case["name"], n_vocab=n, salt=case["salt"], scale=case["scale"], roll=roll,
                logits_sha256=hashlib.sha256(base.tobytes()).hexdigest(),
                settings=s, prompt=case["prompt"], steps=steps)

MODEL_CASES = [  # generations on SmolLM2: prompt, settings, tokens
    dict(prompt="Once upon a time, in a small village,", settings=dict(temperature=0.8, seed=42, repeat_penalty=1.1,
         presence_penalty=0.4, frequency_penalty=0.2, penalty_last_n=32), steps=32),
    dict(prompt="List of fruits: apple, banana,", settings=dict(temperature=0.0, frequency_penalty=1.0,
         presence_penalty=0.5, penalty_last_n=-1), steps=32),
    dict(prompt="The weather today is", settings=dict(temperature=1.0, top_k=20, min_p=0.1, seed=1234,
         logit_bias=[[13, -float("inf")], [30, -float("inf")], [260, 2.0]], presence_penalty=0.3), steps=32),
]

def make_greedy_chain(n_vocab, s):
    "Temperature 0: logit bias, penalties, then the largest logit (the filters in between always keep it)."
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    if s["logit_bias"]:
        biases = (L.llama_logit_bias * len(s["logit_bias"]))(*[L.llama_logit_bias(t, b) for t, b in s["logit_bias"]])
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_logit_bias(n_vocab, len(s["logit_bias"]), biases))
    last_n = s["penalty_last_n"] if s["penalty_last_n"] >= 0 else 4096
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_penalties(n_vocab, last_n, s["repeat_penalty"],
                                                                    s["frequency_penalty"], s["presence_penalty"]))
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
    return chain

def mt_uniforms(seed, n):
    "The doubles std::uniform_real_distribution<double> draws from std::mt19937(seed): two 32-bit words each."
    key = [seed & 0xFFFFFFFF]
    for i in range(1, 624): key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    bits = np.random.MT19937(); bits.state = {"bit_generator": "MT19937", "state": {"key": np.array(key, np.uint32), "pos": 624}}
    words = bits.random_raw(2 * n)
    return [(float(a) + float(b) * 2.0**32) / 2.0**64 for a, b in zip(words[0::2], words[1::2])]

def run_model(path):
    "Each MODEL_CASE through llama.cpp: the chain on the real logits, a token at a time, and how safe each pick is."
    from llama_cpp import Llama
    llm = Llama(model_path=str(path), n_ctx=512, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    n = llm.n_vocab()
    out = []
    for case in MODEL_CASES:
        s = {**DEFAULTS, **case["settings"]}
        ids = llm.tokenize(case["prompt"].encode(), add_bos=True, special=False)
        chain = make_chain(n, s) if s["temperature"] > 0 else make_greedy_chain(n, s)
        for t in ids: L.llama_sampler_accept(chain, t)
        us = mt_uniforms(s["seed"], case["steps"])
        llm.reset(); llm.eval(ids)
        data = (L.llama_token_data * n)()
        tokens, safety, cands = [], [], []
        for step in range(case["steps"]):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            for i in range(n): data[i].id, data[i].logit, data[i].p = i, float(logits[i]), 0.0
            arr = L.llama_token_data_array(data=ctypes.cast(data, L.llama_token_data_p), size=n, selected=-1, sorted=False)
            L.llama_sampler_apply(chain, ctypes.byref(arr))
            token = int(data[arr.selected].id)
            if s["temperature"] == 0:          # greedy: the gap between the two best logits after bias and penalties
                top2 = np.sort(np.array([data[i].logit for i in range(arr.size)], np.float32))[-2:]
                safety.append(float(top2[1] - top2[0]))
            else:                              # sampled: how far u is from the edges of the chosen token's interval
                cum = np.cumsum([data[i].p for i in range(arr.size)], dtype=np.float64)
                u = us[step] * cum[-1]
                lo = cum[arr.selected - 1] if arr.selected > 0 else 0.0
                safety.append(float(min(u - lo, cum[arr.selected] - u)))
            tokens.append(token)
            live = sorted(int(data[i].id) for i in range(arr.size) if s["temperature"] == 0 or data[i].p > 0)
            cands.append(hashlib.sha256(np.array(live, np.int64).tobytes()).hexdigest()[:16])
            L.llama_sampler_accept(chain, token)
            llm.eval([token])
        L.llama_sampler_free(chain)
        out.append(dict(prompt=case["prompt"], ids=ids, settings=s, tokens=tokens, safety=safety,
                        candidates_sha=cands))
        print(case["prompt"], repr(llm.detokenize(tokens).decode("utf-8", "replace")), file=sys.stderr)
    return dict(source=f"llama-cpp-python {L.__version__}", model=Path(path).name, n_ctx=512,
                chain="logit_bias,penalties,top_k,top_p,min_p,temp,dist", cases=out)

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--smollm2" in args:
        i = args.index("--smollm2"); model = args[i + 1]; del args[i:i + 2]
        res = run_model(model)
        Path("tests/fixtures/sampling_smollm2.json").write_text(json.dumps(res, indent=1))
        print("wrote tests/fixtures/sampling_smollm2.json", file=sys.stderr)
    out = args[0] if args else "tests/fixtures/sampling.json"
    fixtures = dict(source=f"llama-cpp-python {L.__version__}", chain="penalties,top_k,top_p,min_p,temp,dist",
                    cases=[run_case(c) for c in CASES])
    with open(out, "w") as f: json.dump(fixtures, f, separators=(",", ":"))
    print("wrote", out, ", ".join(f"{c['name']}:{[s['token'] for s in c['steps']][:5]}" for c in fixtures["cases"]))
