"""The sampler chain (llmbook.sampling): parity with llama.cpp, brute-force references, seeded statistics.

Everything here is deterministic: fixed seeds, no dependence on timing. The llama.cpp reference is
tests/fixtures/sampling.json, made by tools/make_sampling_fixtures.py.
"""
import hashlib, json, math
from pathlib import Path

import numpy as np
import pytest

from sampling_cases import case_logits
from llmbook.sampling import (Sampler, SamplerSettings, _apply_penalties, _apply_temperature, _draw, filter_candidates,
                              _keep_min_p, _keep_top_k, _keep_top_p, _mt19937_state, _recent_tokens, _seeded_generator,
                              _uniform01)

FIXTURES = Path(__file__).parent / "fixtures" / "sampling.json"

def softmax(logits):
    "Probabilities from logits (float32), the largest logit subtracted first (chapter 09's; the sampler does not use it)."
    logits = np.asarray(logits, dtype=np.float32)
    e = np.exp(logits - logits.max())
    return e / e.sum()


# --- llama.cpp parity ---------------------------------------------------------------------------------

CASES = json.loads(FIXTURES.read_text())["cases"]

@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_tokens_as_llama_cpp(case):
    base = case_logits(case["n_vocab"], case["salt"], case["scale"])
    assert hashlib.sha256(base.tobytes()).hexdigest() == case["logits_sha256"], "fixture logits not rebuilt exactly"
    smp, history = Sampler(**case["settings"]), list(case["prompt"])
    for step, ref in enumerate(case["steps"]):
        token = smp.sample(np.roll(base, case["roll"] * step), history)
        assert token == ref["token"], f"step {step}"
        ids, probs = smp.last_candidates
        assert int((probs > 0).sum()) == ref["n_candidates"], f"step {step}"
        k = len(ref["top_ids"])
        assert ids[:k].tolist() == ref["top_ids"], f"step {step}"
        np.testing.assert_allclose(probs[:k], ref["top_probs"], atol=2e-6)
        history.append(token)

def test_fixtures_cover_every_stage():
    "The parity cases switch each stage on and off, and include greedy and vocabularies over 1024 and 128 tokens."
    s = [c["settings"] for c in CASES]
    assert any(x["temperature"] == 0 for x in s) and any(x["top_k"] == 0 for x in s) and any(x["top_k"] > 128 for x in s)
    assert any(x["top_p"] == 1 for x in s) and any(x["min_p"] == 0 for x in s) and any(x["min_keep"] > 1 for x in s)
    assert any(x["repeat_penalty"] != 1 and x["frequency_penalty"] and x["presence_penalty"] for x in s)
    assert any(c["n_vocab"] > 1024 and c["settings"]["top_k"] == 0 and c["settings"]["top_p"] < 1 for c in CASES)
    assert sum(len(c["steps"]) for c in CASES) >= 250


# --- the random numbers ---------------------------------------------------------------------------------

def test_mt19937_matches_the_cpp_standard():
    # [rand.predef]: the 10000th invocation of a default-constructed std::mt19937 (seed 5489) yields 4123659995
    assert _seeded_generator(5489).bit_generator.random_raw(10_000)[-1] == 4123659995
    # numpy's legacy RandomState seeds MT19937 with the same recurrence
    assert np.array_equal(_mt19937_state(12345), np.random.RandomState(12345).get_state()[1])

def test_uniform01_is_uniform():
    g = _seeded_generator(2024)
    u = np.array([_uniform01(g) for _ in range(50_000)])
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 4 * math.sqrt(1 / 12 / len(u))
    hist = np.bincount((u * 20).astype(int), minlength=20)
    expected = len(u) / 20
    assert ((hist - expected) ** 2 / expected).sum() < 19 + 6 * math.sqrt(2 * 19)


# --- each stage against a brute-force reference ---------------------------------------------------------

def _random_logits(rng, n):
    return (rng.standard_normal(n) * rng.choice([0.3, 1.0, 3.0, 8.0])).astype(np.float32)

def test_top_k_is_the_k_best_sorted():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 3000)); x = _random_logits(rng, n); k = int(rng.integers(0, n + 5))
        ids, l = _keep_top_k(np.arange(n), x, k)
        want = n if k <= 0 else min(k, n)
        assert len(ids) == want and np.array_equal(x[ids], l) and len(set(ids.tolist())) == want
        assert np.array_equal(l, np.sort(x)[::-1][:want])

def test_top_k_ties_keep_id_order():
    "Tied logits at the cut: the lowest ids stay, in id order; logits sorted, all equal or mostly -inf, too."
    assert _keep_top_k(np.arange(6), np.array([1, 3, 3, 2, 3, 3], np.float32), 3)[0].tolist() == [1, 2, 4]
    masked = np.where(np.arange(1000) % 7, -np.inf, np.arange(1000.0)).astype(np.float32)
    for x in (np.arange(1000, dtype=np.float32), np.zeros(1000, np.float32), masked):
        ids, l = _keep_top_k(np.arange(1000), x, 40)
        assert np.array_equal(l, np.sort(x)[::-1][:40]) and np.array_equal(x[ids], l)
        assert all(a < b for a, b, u, v in zip(ids, ids[1:], l, l[1:]) if u == v)

def _brute_nucleus(x, p, min_keep):
    "Size of the top-p nucleus in float64 (None when float32 running sums, as llama.cpp's, could land either side)."
    probs = np.sort(np.exp(x.astype(np.float64) - x.max()))[::-1]
    csum = np.cumsum(probs / probs.sum())
    i = int(np.searchsorted(csum, p))                  # first index with csum >= p
    tol = 1e-6 + 1e-7 * len(x)                       # worst-case rounding of a float32 running sum
    if i < len(csum) and abs(csum[i] - p) < tol or i > 0 and abs(csum[i - 1] - p) < tol: return None
    return min(len(x), max(i + 1, min_keep))

def test_top_p_is_the_minimal_nucleus():
    rng = np.random.default_rng(2)
    checked = 0
    for trial in range(300):
        n = int(rng.choice([5, 40, 300, 1500, 20_000])); x = _random_logits(rng, n)
        p = float(rng.choice([0.05, 0.3, 0.7, 0.9, 0.95, 0.99, 0.999]))
        min_keep = int(rng.choice([0, 1, 3, 300]))
        if trial % 3 == 0: x = np.sort(x)[::-1].copy()             # already sorted input
        ids, l = _keep_top_p(np.arange(n), x, p, min_keep)
        assert np.all(np.diff(l) <= 0) and np.array_equal(x[ids], l)
        assert np.array_equal(l, np.sort(x)[::-1][:len(l)])        # a prefix of the sorted candidates
        want = _brute_nucleus(x, p, min_keep)
        if want is not None: assert len(ids) == want, (n, p, min_keep); checked += 1
    assert checked > 200

def test_top_p_large_flat_vocabulary_needs_more_than_256():
    x = np.random.default_rng(3).standard_normal(100_000).astype(np.float32) * 0.5    # flat: huge nucleus
    ids, l = _keep_top_p(np.arange(len(x)), x, 0.9)
    csum = np.cumsum(np.sort(softmax(x).astype(np.float64))[::-1])
    assert len(ids) > 50_000 and csum[len(ids) - 1] >= 0.9 - 1e-3 and csum[len(ids) - 2] < 0.9 + 1e-3
    assert np.array_equal(l, np.sort(x)[::-1][:len(ids)])
    ids, _ = _keep_top_p(np.arange(len(x)), x * 40, 0.01, min_keep=1000)  # peaked, but min_keep asks for 1000
    assert len(ids) == 1000

def test_min_p_threshold_and_order():
    rng = np.random.default_rng(4)
    for _ in range(300):
        n = int(rng.integers(1, 5000)); x = _random_logits(rng, n)
        m = float(rng.choice([0.0, 0.01, 0.05, 0.1, 0.5, 0.9, 1.0])); min_keep = int(rng.choice([1, 2, 50]))
        ids, l = _keep_min_p(np.arange(n), x, m, min_keep)
        if m == 0: assert len(ids) == n; continue
        pr = softmax(x).astype(np.float64)
        passing = np.flatnonzero(pr >= m * pr.max() * (1 + 1e-5))
        failing = np.flatnonzero(pr < m * pr.max() * (1 - 1e-5))
        assert len(ids) >= min(min_keep, n)
        if len(passing) >= min_keep:
            assert set(passing.tolist()) <= set(ids.tolist()) and not set(failing.tolist()) & set(ids.tolist())
            assert np.all(np.diff(ids) > 0)                         # the input (id) order is kept
        else:
            assert len(ids) == min(min_keep, n) and np.array_equal(l, np.sort(x)[::-1][:len(ids)])

def _penalize_reference(logits, history, last_n, r, f, q):
    "A plain-Python reference of llama.cpp's penalties: count the window, adjust each seen token."
    window = history if last_n == -1 else history[max(0, len(history) - last_n):]
    out = [float(v) for v in logits]
    for t in set(window):
        c = window.count(t)
        out[t] = out[t] * r if out[t] <= 0 else out[t] / r
        out[t] -= c * f + q
    return np.float32(out)

def test_penalties_against_reference():
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(2, 200)); x = _random_logits(rng, n)
        history = rng.integers(0, n, int(rng.integers(0, 100))).tolist()
        last_n = int(rng.choice([-1, 1, 8, 64, 1000]))
        r, f, q = float(rng.uniform(0.5, 2)), float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1))
        got = _apply_penalties(x, _recent_tokens(history, last_n, n), r, f, q)
        np.testing.assert_allclose(got, _penalize_reference(x, history, last_n, r, f, q), rtol=1e-6, atol=1e-6)

def test_temperature_and_softmax():
    x = np.float32([3.0, 1.0, -2.0, -np.inf])
    assert np.allclose(_apply_temperature(x, 2.0)[:3], [1.5, 0.5, -1.0])
    p = softmax(x); assert p[3] == 0 and abs(p.sum() - 1) < 1e-6
    for t in [0.25, 0.5, 2.0]:                    # p_T(i) is proportional to p(i) ** (1/T)
        want = softmax(x)[:3].astype(np.float64) ** (1 / t)
        np.testing.assert_allclose(softmax(_apply_temperature(x, t))[:3], want / want.sum(), rtol=1e-5)

def test_draw_walks_the_cumulative_distribution():
    x = np.log(np.float32([0.1, 0.2, 0.3, 0.4]))
    edges = [0.1, 0.3, 0.6, 1.0]
    for u in np.linspace(0, 0.999, 200):
        i, probs = _draw(x, float(u))
        assert i == int(np.searchsorted(edges, u + 1e-9)) or min(abs(u - e) for e in edges) < 1e-6
    assert _draw(np.float32([5.0]), 0.99)[0] == 0


# --- the sampler: statistics, determinism, greedy, errors -----------------------------------------------

def _chi_square(counts, probs):
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())

def test_draws_follow_the_filtered_distribution():
    x = (np.random.default_rng(6).standard_normal(2000) * 2.5).astype(np.float32)
    settings = dict(top_k=60, top_p=0.9, min_p=0.01, temperature=1.3, seed=77)
    smp = Sampler(**settings)
    tokens = np.array([smp.sample(x) for _ in range(40_000)])
    ids, probs = smp.last_candidates
    counts = np.bincount(tokens, minlength=len(x))
    assert counts.sum() == counts[ids].sum()                    # nothing outside the candidates
    dof = len(ids) - 1
    assert dof >= 10
    assert _chi_square(counts[ids], probs) < dof + 6 * math.sqrt(2 * dof)
    # power: the same counts are clearly *not* the distribution at temperature 1
    at_t1 = softmax(x[ids]).astype(np.float64)
    assert _chi_square(counts[ids], at_t1) > dof + 20 * math.sqrt(2 * dof)
    # the filtered distribution is the full softmax restricted to the candidates, at T = 1.3
    want = softmax(x / np.float32(1.3))[ids].astype(np.float64)
    np.testing.assert_allclose(probs, want / want.sum(), rtol=1e-5)

def test_same_seed_same_tokens_and_reset():
    rng = np.random.default_rng(8)
    steps = [_random_logits(rng, 5000) for _ in range(30)]
    def run(seed):
        smp, hist = Sampler(seed=seed, repeat_penalty=1.2, frequency_penalty=0.1), [1, 2, 3]
        for x in steps: hist.append(smp.sample(x, hist))
        return hist
    assert run(11) == run(11) and run(11) != run(12)
    smp = Sampler(seed=3); a = [smp.sample(steps[0]) for _ in range(20)]
    smp.reset(); assert [smp.sample(steps[0]) for _ in range(20)] == a
    smp.reset(seed=4); assert [smp.sample(steps[0]) for _ in range(20)] != a
    # seed=None: a fresh seed each time (two 20-token draws from ~20 candidates coinciding is ~1e-26)
    s1, s2 = Sampler(seed=None, temperature=1.5), Sampler(seed=None, temperature=1.5)
    assert [s1.sample(steps[1]) for _ in range(20)] != [s2.sample(steps[1]) for _ in range(20)]

def test_sampler_does_not_modify_inputs():
    x = _random_logits(np.random.default_rng(9), 1000); x0 = x.copy(); hist = [5, 5, 7]
    Sampler(repeat_penalty=1.5, frequency_penalty=1.0, presence_penalty=1.0).sample(x, hist)
    assert np.array_equal(x, x0) and hist == [5, 5, 7]

def test_greedy_is_argmax_after_penalties():
    rng = np.random.default_rng(10)
    for _ in range(50):
        x = _random_logits(rng, 3000); hist = rng.integers(0, 3000, 50).tolist()
        s = dict(repeat_penalty=1.3, presence_penalty=0.5, penalty_last_n=32)
        got = Sampler(temperature=0, **s).sample(x, hist)
        assert got == int(np.argmax(_apply_penalties(x, hist[-32:], 1.3, 0.0, 0.5)))
        # the filters always keep that token: it is the best candidate of the non-greedy chain too
        ids, l = filter_candidates(x, hist, SamplerSettings(temperature=1.0, **s))
        assert ids[np.argmax(l)] == got

def test_chain_is_the_stages_in_order():
    "filter_candidates = bias, penalties, top-k, top-p, min-p, temperature, each stage applied by hand (chapter 09's figure)."
    rng = np.random.default_rng(12)
    for _ in range(50):
        n = int(rng.integers(2, 3000)); x = _random_logits(rng, n); hist = rng.integers(0, n, 40).tolist()
        s = SamplerSettings(repeat_penalty=1.3, frequency_penalty=0.1, top_k=int(rng.integers(0, 60)), top_p=0.95,
                            min_p=0.05, temperature=0.7, logit_bias={0: -math.inf, 1: 2.0})
        y = x.copy(); y[0] = -np.inf; y[1] += np.float32(2.0)
        y = _apply_penalties(y, hist[-s.penalty_last_n:], 1.3, 0.1)
        i, y = _keep_top_k(np.arange(n), y, s.top_k) if s.top_k else (np.arange(n), y)
        i, y = _keep_top_p(i, y, 0.95)
        i, y = _keep_min_p(i, y, 0.05)
        ids, l = filter_candidates(x, hist, s)
        assert np.array_equal(ids, i) and np.array_equal(l, _apply_temperature(y, 0.7))

def test_large_vocabulary_defaults():
    "Gemma-sized vocabulary: the default chain leaves at most top_k candidates, all from the best 40 logits."
    x = (np.random.default_rng(11).standard_normal(262_144) * 3).astype(np.float32)
    smp = Sampler()
    t = smp.sample(x, list(range(64)))
    ids, probs = smp.last_candidates
    assert 1 <= len(ids) <= 40 and t in ids.tolist()
    assert set(ids.tolist()) <= set(np.argsort(-x)[:40].tolist())

@pytest.mark.parametrize("kw,word", [
    (dict(temperature=-0.1), "temperature"), (dict(temperature=float("inf")), "temperature"),
    (dict(top_k=-1), "top_k"), (dict(top_k=True), "top_k"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.01), "top_p"),
    (dict(top_p=float("nan")), "top_p"), (dict(min_p=-0.01), "min_p"), (dict(min_p=1.5), "min_p"),
    (dict(min_keep=-2), "min_keep"), (dict(repeat_penalty=0.0), "repeat_penalty"), (dict(repeat_penalty=-1), "repeat_penalty"),
    (dict(frequency_penalty=float("nan")), "frequency_penalty"), (dict(presence_penalty="1"), "presence_penalty"),
    (dict(penalty_last_n=-5), "penalty_last_n"), (dict(penalty_last_n=2.0), "penalty_last_n"),
    (dict(seed=-1), "seed"), (dict(seed=2**32), "seed"), (dict(seed="0"), "seed")])
def test_bad_settings_raise_value_error(kw, word):
    with pytest.raises(ValueError, match=word): Sampler(**kw)
    with pytest.raises(ValueError, match=word): SamplerSettings(**kw)

def test_bad_inputs_raise_value_error():
    smp = Sampler(repeat_penalty=1.1)
    for logits, history, word in [(np.zeros((2, 2)), [], "1-D"), ([], [], "non-empty"), (np.full(3, np.nan), [], "finite"),
                                  (np.full(3, -np.inf), [], "finite"), (np.float32([0, np.inf, 1]), [], "finite"),
                                  (np.zeros(3), [3], "outside"), (np.zeros(3), [-1], "outside"),
                                  (np.zeros(3), [[0, 1]], "flat")]:
        with pytest.raises(ValueError, match=word): smp.sample(logits, history)
    with pytest.raises(ValueError, match="not both"): Sampler(SamplerSettings(), top_k=3)
    with pytest.raises(ValueError, match="SamplerSettings"): Sampler({"top_k": 3})
    with pytest.raises(ValueError, match="seed"): Sampler().reset(seed=-3)


def test_hand_made_cases():
    "Chapter 09's small worked examples: the penalties' sign rule, top-p's minimal nucleus, min-p's bar, the draw."
    x = np.float32([2.0, -2.0, 0.0, 1.0])
    assert np.allclose(_apply_penalties(x, [0, 1, 2, 0], repeat_penalty=2.0), [1.0, -4.0, 0.0, 1.0])
    assert np.allclose(x, [2.0, -2.0, 0.0, 1.0])                                   # the input is not modified
    assert np.allclose(_apply_penalties(x, [0, 1, 2, 0], frequency_penalty=0.5, presence_penalty=0.25),
                       [2 - 2 * 0.5 - 0.25, -2 - 0.5 - 0.25, 0 - 0.5 - 0.25, 1.0])
    assert np.array_equal(_apply_penalties(x, []), x)
    q = np.log(np.float32([0.05, 0.5, 0.15, 0.3]))                                 # unsorted on purpose
    for p, n in [(0.4, 1), (0.49, 1), (0.51, 2), (0.79, 2), (0.81, 3), (0.94, 3), (0.96, 4), (1.0, 4)]:
        ids, _ = _keep_top_p(np.arange(4), q, p)
        assert len(ids) == n, (p, len(ids))
        if p < 1: assert list(ids) == [1, 3, 2, 0][:n]
    assert len(_keep_top_p(np.arange(4), q, 0.4, min_keep=3)[0]) == 3
    q = np.log(np.float32([0.1, 0.4, 0.2, 0.3]))
    assert list(_keep_min_p(np.arange(4), q, 0.5)[0]) == [1, 2, 3]                  # current order kept
    assert list(_keep_min_p(np.arange(4), q, 0.9)[0]) == [1]
    assert list(_keep_min_p(np.arange(4), q, 0.9, min_keep=2)[0]) == [1, 3]
    assert len(_keep_min_p(np.arange(4), q, 0.0)[0]) == 4
    q = np.log(np.float32([0.5, 0.3, 0.2]))
    assert [_draw(q, u)[0] for u in [0.0, 0.49, 0.51, 0.79, 0.81, 0.999]] == [0, 0, 1, 1, 2, 2]
    assert _recent_tokens([1, 2, 3], 8, 10).tolist() == [1, 2, 3]
    assert _recent_tokens(list(range(10)), 4, 10).tolist() == [6, 7, 8, 9]
    assert _recent_tokens(np.arange(10), -1, 10).tolist() == list(range(10))
    assert _recent_tokens(list(range(10)), 0, 10).tolist() == []
    x = np.float32(np.linspace(3, -3, 30))
    ids, l = filter_candidates(x, [], SamplerSettings(top_k=0, top_p=1.0, min_p=0.0, temperature=1.0))
    assert np.array_equal(ids, np.arange(30)) and np.array_equal(l, x)            # every filter off: all, in id order
    g = Sampler(temperature=0)
    assert g.sample(x) == 0 and g.last_candidates[0].tolist() == [0] and g.last_candidates[1].tolist() == [1.0]
    assert Sampler(temperature=0, repeat_penalty=2.0).sample(x, [0]) == 1
