"""Make tests/fixtures/sampling.json: what llama.cpp's sampler chain picks, step by step, with a fixed seed.

Run with a Python that has llama-cpp-python (dev only, never a dependency of llmbook):

    $REFPY tools/make_sampling_fixtures.py [tests/fixtures/sampling.json]

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
]
ROLL = 7  # default rotation per step; roll=0 keeps the logits fixed so only the penalties move the winner

DEFAULTS = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, min_keep=1, repeat_penalty=1.0,
                frequency_penalty=0.0, presence_penalty=0.0, penalty_last_n=64, seed=0)

def make_chain(n_vocab, s):
    "llama.cpp's default chain for these settings, as common/sampling.cpp builds it."
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    add = lambda smpl: L.llama_sampler_chain_add(chain, smpl)
    add(L.llama_sampler_init_penalties(n_vocab, s["penalty_last_n"], s["repeat_penalty"],
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

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/sampling.json"
    fixtures = dict(source=f"llama-cpp-python {L.__version__}", chain="penalties,top_k,top_p,min_p,temp,dist",
                    cases=[run_case(c) for c in CASES])
    with open(out, "w") as f: json.dump(fixtures, f, separators=(",", ":"))
    print("wrote", out, ", ".join(f"{c['name']}:{[s['token'] for s in c['steps']][:5]}" for c in fixtures["cases"]))
