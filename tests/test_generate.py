"""Chapter 10 on tiny random models: the generation loop against a bare forward loop, stop rules, streaming,
sessions, chat templates, context limits, threads, bad input."""
import json, random, threading
import numpy as np
import pytest
from llmbook.loading import load
from llmbook.generate import StopMatcher, Completion, Session
from llmbook.chat import ChatTemplateError, render_chat
from llmbook.testmodels import write_random_chat_model, CHATML_TEMPLATE
from llmbook.kvcache import ContextFullError
from llmbook.sampling import Sampler, SamplerSettings

HOT = dict(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "A random llama with a byte-level vocabulary of all 256 bytes (so it can emit broken UTF-8) and ChatML."
    return load(write_random_chat_model(tmp_path_factory.mktemp("m") / "tiny.gguf", alphabet=range(256)), n_ctx=256)


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory):
    return load(write_random_chat_model(tmp_path_factory.mktemp("g") / "g.gguf", arch="gemma3", n_embd=64, n_heads=4,
                                        n_kv_heads=1, head_dim=32, seed=3), n_ctx=128)


def bare_loop(model, ids, n, settings, eog=()):
    "Reference: a fresh cache, forward, the sampler on the full history; stops after an EOG token."
    cache, history, out = model.new_cache(), list(ids), []
    sampler = Sampler(settings)
    logits = model.forward(ids, cache)[-1]
    while len(out) < n:
        t = sampler.sample(logits, history)
        out.append(t); history.append(t)
        if t in eog or len(out) == n: break
        logits = model.forward([t], cache)[-1]
    return out


@pytest.mark.parametrize("settings", [dict(temperature=0.0), dict(temperature=0.0, repeat_penalty=1.3),
                                      dict(temperature=0.9, seed=5), dict(temperature=1.2, top_k=5, seed=11, repeat_penalty=1.1)])
def test_generate_matches_bare_loop(tiny, settings):
    ids = tiny.tokenizer.encode("the cat sat on")
    c = tiny.generate(ids, max_tokens=40, **settings)
    want = bare_loop(tiny, ids, 40, SamplerSettings(**{"top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": 0, **settings}),
                     tiny.tokenizer.eog_ids)
    assert c.tokens == want
    assert c.stop_reason == ("eos" if tiny.tokenizer.is_eog(want[-1]) else "length")


def test_gemma3_tiny(tiny_gemma):
    c = tiny_gemma.generate("hello", max_tokens=20, ignore_eos=True)
    assert len(c.tokens) == 20 and c.stop_reason == "length"
    assert tiny_gemma.generate("hello", max_tokens=20, ignore_eos=True) == c


def test_fresh_context_each_call(tiny):
    a = tiny.generate("the cat", max_tokens=16, seed=3, **HOT)
    tiny.generate("something else entirely", max_tokens=30, **HOT)
    assert tiny.generate("the cat", max_tokens=16, seed=3, **HOT).tokens == a.tokens
    assert tiny.generate("the cat", max_tokens=16, seed=4, **HOT).tokens != a.tokens


def test_text_and_ids_prompts(tiny):
    text = tiny.generate("the cat", max_tokens=10)
    ids = tiny.generate(tiny.tokenizer.encode("the cat", add_special=True, parse_special=True), max_tokens=10)
    assert text.tokens == ids.tokens and text == ids
    np_ids = tiny.generate(np.array(tiny.tokenizer.encode("the cat"), dtype=np.int32), max_tokens=10)
    assert np_ids.tokens == text.tokens


def test_prompt_parses_special_tokens(tiny):
    s = tiny.session()
    s.generate("<|im_start|>user", max_tokens=0)
    assert s.tokens[0] == tiny.tokenizer.token_id["<|im_start|>"]


def test_completion_is_a_str_with_info(tiny):
    c = tiny.generate("the cat", max_tokens=8, ignore_eos=True)
    assert isinstance(c, str) and type(c) is Completion
    assert json.loads(json.dumps([c])) == [str(c)]
    assert c.n_prompt == len(tiny.tokenizer.encode("the cat")) and c.n_decoded == 7
    assert c.prefill_tps > 0 and c.decode_tps > 0 and "tok/s" in c.timings()
    assert tiny.generate("the cat", max_tokens=0).tokens == []


def test_stream_pieces_join_to_completion_and_are_utf8_safe(tiny):
    for seed in range(6):
        st = tiny.generate("the cat", max_tokens=60, seed=seed, stream=True, ignore_eos=True, **HOT)
        pieces = list(st)
        assert all(isinstance(p, str) and p for p in pieces)
        assert "".join(pieces) == st.result
        # the text is exactly the tokens' bytes decoded (invalid sequences replaced), as one piece or many
        assert st.result == tiny.tokenizer.decode(st.result.tokens)


def test_stream_tokens_details(tiny):
    st = tiny.generate("the", max_tokens=30, stream=True, details=True, seed=1, temperature=0.7)
    steps = list(st)
    sampled = [s for s in steps if s.token is not None]
    assert [s.token for s in sampled] == st.result.tokens
    assert "".join(s.piece for s in steps) == st.result
    for s in sampled:
        ids, probs = s.candidates
        assert s.token in ids and abs(probs.sum() - 1) < 1e-4 and np.all(np.diff(probs) <= 0)
        assert s.prob == pytest.approx(float(probs[ids == s.token][0]))


def test_cancel_from_another_thread(tiny):
    cancel = threading.Event()
    st = tiny.generate("the", max_tokens=200, stream=True, ignore_eos=True, cancel=cancel)
    next(st)
    threading.Timer(0.0, cancel.set).start()
    list(st)
    assert st.result.stop_reason == "cancelled" and len(st.result.tokens) < 200
    st = tiny.generate("the", max_tokens=200, stream=True, ignore_eos=True)
    next(st); st.close()                                              # the reader went away
    assert st.result is None and tiny.generate("the", max_tokens=3, ignore_eos=True).stop_reason == "length"


@pytest.mark.parametrize("seed", range(30))
def test_stop_matcher_any_cut(seed):
    "Fed in random pieces, the matcher finds the same stop and releases the same text as a search of the whole."
    rng = random.Random(seed)
    alphabet = "ab\n:U"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    stops = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 5))) for _ in range(rng.randrange(1, 4))]
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    want = (text[:min(hits)], True) if hits else (text, False)
    m, out, found, i = StopMatcher(stops), [], False, 0
    while i < len(text) and not found:
        n = rng.randrange(1, 6)
        piece, found = m.push(text[i:i + n]); out.append(piece); i += n
        assert not any(s in "".join(out) for s in stops)             # nothing released ever contains a stop
    if not found: out.append(m.flush())
    assert ("".join(out), found) == want, (text, stops)


def test_stop_strings_in_generation(tiny):
    full = tiny.generate("the cat", max_tokens=40, ignore_eos=True, **HOT, seed=2)
    for k in (3, 11, 25):
        stop = full[k:k + 2]
        if not stop.strip(): continue
        cut = tiny.generate("the cat", max_tokens=40, ignore_eos=True, **HOT, seed=2, stop=[stop, "never here 123"])
        assert cut.stop_reason == "stop" and cut == full[:full.find(stop)]
        assert "".join(tiny.generate("the cat", max_tokens=40, ignore_eos=True, **HOT, seed=2, stop=stop, stream=True)) == cut


def test_eos_stops_and_ignore_eos_masks(tiny):
    eos_runs = [tiny.generate("a", max_tokens=300, seed=k, temperature=2.0, top_k=0, top_p=1.0, min_p=0.0) for k in range(12)]
    assert any(c.stop_reason == "eos" for c in eos_runs)
    for c in eos_runs:
        assert (c.stop_reason == "eos") == tiny.tokenizer.is_eog(c.tokens[-1])
        assert not any(tiny.tokenizer.is_eog(t) for t in c.tokens[:-1])
    for k in range(12):
        c = tiny.generate("a", max_tokens=100, seed=k, ignore_eos=True, temperature=2.0, top_k=0, top_p=1.0, min_p=0.0)
        assert c.stop_reason == "length" and not any(tiny.tokenizer.is_eog(t) for t in c.tokens)


def test_context_full_and_shift(tiny):
    s = tiny.session(n_ctx=24)
    c = s.generate("the cat", max_tokens=100, ignore_eos=True)
    assert c.stop_reason == "context" and s.cache.pos == 24 and len(s.tokens) == 25
    s.reset()
    c = s.generate("the cat", max_tokens=60, ignore_eos=True, context_shift=True)
    assert c.stop_reason == "length" and len(c.tokens) == 60 and s.cache.pos <= 24
    s.reset()
    with pytest.raises(ContextFullError):
        s.generate("x" * 30, max_tokens=1)
    assert s.tokens == [] and s.generate("the", max_tokens=2, ignore_eos=True).stop_reason == "length"   # still usable
    with pytest.raises(ContextFullError):
        tiny.generate(list(range(10)) * 30, max_tokens=1)             # longer than the model's context


def test_session_continues_and_snapshots(tiny):
    s = tiny.session()
    first = s.generate("the cat", max_tokens=6, ignore_eos=True)
    s.generate(" and", max_tokens=6, ignore_eos=True)
    ids = tiny.tokenizer.encode("the cat")
    assert s.tokens[:len(ids) + 6] == ids + first.tokens
    snap = s.snapshot()
    a = s.generate(" then", max_tokens=10, ignore_eos=True, **HOT, seed=9)
    s.restore(snap)
    b = s.generate(" then", max_tokens=10, ignore_eos=True, **HOT, seed=9)
    assert a.tokens == b.tokens
    # continuing a session equals running the whole history on a fresh context
    whole = tiny.generate(s.tokens[:len(s.tokens) - len(b.tokens)], max_tokens=10, ignore_eos=True, **HOT, seed=9)
    assert whole.tokens == b.tokens


def test_reuse_prefix(tiny):
    s = tiny.session()
    ids = tiny.tokenizer.encode("the cat sat on the mat")
    s.generate(ids, max_tokens=0)
    assert s.reuse_prefix(ids[:4] + [65, 66]) == 4 and s.cache.pos == 4 and s.pending == [65, 66]
    assert s.reuse_prefix(ids[:4]) == 3                               # one token is left to run
    assert s.tokens == ids[:4]


def test_chat_template_and_conversation(tiny):
    msgs = [{"role": "user", "content": "hi"}]
    ids = tiny.chat_prompt(msgs)
    assert tiny.tokenizer.decode(ids, special=True) == render_chat(CHATML_TEMPLATE, msgs)
    s = tiny.session()
    a1 = s.chat("hi", max_tokens=8)
    assert s.messages == msgs + [{"role": "assistant", "content": str(a1)}]
    assert a1.n_prompt == len(ids)
    a2 = s.chat("more?", max_tokens=8)
    ids2 = tiny.chat_prompt(s.messages[:-1])
    assert a2.n_prompt < len(ids2) // 2                              # the first turn was reused from the cache
    assert s.tokens[:len(ids2)] == ids2
    assert tiny.chat(msgs, max_tokens=8) == a1
    st = s.chat({"role": "user", "content": "stream"}, max_tokens=8, stream=True)
    assert len(s.messages) == 4                                      # the turn joins only when it completes
    text = "".join(st)
    assert s.messages[-1] == {"role": "assistant", "content": text} and len(s.messages) == 6
    s.reset()
    assert s.messages == [] and s.tokens == []


def test_chat_errors(tiny, tmp_path):
    with pytest.raises(ValueError): tiny.chat("just a string")
    with pytest.raises(ValueError): tiny.chat([{"role": "user"}])
    with pytest.raises(ValueError): tiny.chat([])
    with pytest.raises(ChatTemplateError, match="refused"):
        tiny.chat([{"role": "user", "content": "x"}], template="{{ raise_exception('nope') }}")
    with pytest.raises(ChatTemplateError):
        tiny.chat([{"role": "user", "content": "x"}], template="{{ ''.__class__.__mro__[1].__subclasses__() }}")
    bare = load(write_random_chat_model(tmp_path / "nt.gguf", chat_template=None))
    with pytest.warns(UserWarning, match="built-in chatml, chosen by architecture llama"):   # no template: ChatML
        assert bare.chat([{"role": "user", "content": "x"}], max_tokens=2).stop_reason in ("length", "eos")
    with pytest.raises(ChatTemplateError, match="unknown chat template"):
        bare.chat([{"role": "user", "content": "x"}], template="no-such-template")
    assert bare.chat([{"role": "user", "content": "x"}], template=CHATML_TEMPLATE, max_tokens=2).stop_reason in ("length", "eos")


@pytest.mark.parametrize("kwargs, err", [
    (dict(prompt=""), ValueError), (dict(prompt=[]), ValueError), (dict(prompt=[1.5, 2.0]), ValueError),
    (dict(prompt=[1, 10_000]), ValueError), (dict(prompt=[-1]), ValueError), (dict(prompt="a", max_tokens=-1), ValueError),
    (dict(prompt="a", max_tokens=2.5), ValueError), (dict(prompt="a", temperature=-1), ValueError),
    (dict(prompt="a", top_p=0), ValueError), (dict(prompt="a", seed=-3), ValueError), (dict(prompt="a", stop=[3]), TypeError),
])
def test_bad_input(tiny, kwargs, err):
    with pytest.raises(err):
        tiny.generate(**kwargs)
    if "max_tokens" in kwargs or "stop" in kwargs:
        with pytest.raises(err):
            tiny.generate(**kwargs, stream=True)                      # at once, not at the first piece
    assert tiny.generate("ok", max_tokens=2, ignore_eos=True).stop_reason == "length"   # nothing was left broken


def test_threads_give_the_same_results(tiny):
    jobs = [dict(seed=k, **HOT) for k in range(4)]
    alone = [tiny.generate("the cat", max_tokens=30, ignore_eos=True, **kw).tokens for kw in jobs]
    sessions = [tiny.session() for _ in jobs]
    results, errors = [None] * len(jobs), []
    def work(i):
        try:
            results[i] = [tiny.generate("the cat", max_tokens=30, ignore_eos=True, **jobs[i]).tokens,
                          sessions[i].generate("the cat", max_tokens=30, ignore_eos=True, **jobs[i]).tokens]
        except Exception as e: errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads: t.start()
    for t in threads: t.join()
    assert not errors
    assert results == [[a, a] for a in alone]


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError): load(tmp_path / "missing.gguf")
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ValueError): load(tmp_path / "notes.txt")


# ---------------------------------------------------------------- issue 16: knobs, logprobs, grammars
@pytest.mark.parametrize("knobs", [
    dict(temperature=0.0, presence_penalty=1.5, frequency_penalty=0.5, penalty_last_n=-1),
    dict(temperature=0.9, seed=2, presence_penalty=0.7, penalty_last_n=8, logit_bias={65: 3.0, 66: float("-inf")}),
    dict(temperature=0.0, logit_bias={t: float("-inf") for t in range(0, 200)}),
])
def test_new_knobs_match_bare_loop(tiny, knobs):
    ids = tiny.tokenizer.encode("hello", add_special=True)
    c = tiny.generate(ids, max_tokens=16, ignore_eos=True, **knobs)
    s = dict(knobs); s["logit_bias"] = s.get("logit_bias") or ()
    eog = np.array(sorted(tiny.tokenizer.eog_ids))
    cache, history, out = tiny.new_cache(), list(ids), []
    sampler = Sampler(SamplerSettings(**s))
    logits = tiny.forward(ids, cache)[-1]
    while len(out) < 16:
        logits[eog] = -np.inf
        t = sampler.sample(logits, history); out.append(t); history.append(t)
        logits = tiny.forward([t], cache)[-1]
    assert c.tokens == out
    if "logit_bias" in knobs and len(knobs["logit_bias"]) > 100: assert min(c.tokens) >= 200


def test_logprobs_are_the_models_log_softmax(tiny):
    ids = tiny.tokenizer.encode("abc", add_special=True)
    c = tiny.generate(ids, max_tokens=5, temperature=0.8, seed=1, logprobs=4, repeat_penalty=1.5)
    assert c.logprobs is not None and len(c.logprobs) == len(c.tokens)
    x = tiny.logits(ids + c.tokens).astype(np.float64)
    lsm = x - x.max(1, keepdims=True)
    lsm -= np.log(np.exp(lsm).sum(1, keepdims=True))
    for i, (tid, lp, top) in enumerate(c.logprobs):
        row = lsm[len(ids) - 1 + i]
        assert tid == c.tokens[i] and abs(lp - row[tid]) < 1e-3
        assert [t for t, _ in top] == list(np.argsort(-row, kind="stable")[:4])
        assert np.allclose([v for _, v in top], np.sort(row)[::-1][:4], atol=1e-3)
    assert tiny.generate(ids, max_tokens=2).logprobs is None
    steps = [s for s in tiny.generate(ids, max_tokens=3, logprobs=2, stream=True, details=True) if s.token is not None]
    assert all(s.logprob is not None and len(s.top_logprobs) == 2 for s in steps)


@pytest.mark.parametrize("grammar", [
    'root ::= [a-z]{2,4} "é" [^a-z\\x00-\\x1F]{1,3} "→" "."',
    'root ::= ("ab" | "ü" [0-9]) ("," " "? [0-9a-f]{1,2})* "!"',
])
def test_grammar_on_a_byte_vocabulary(tiny, grammar):
    "Tokens are single bytes here: every multi-byte character is split, so the partial-UTF-8 states do the work."
    from llmbook.grammar import Grammar, GrammarMatcher
    g = Grammar(grammar)
    for seed in range(6):
        c = tiny.generate("x", max_tokens=40, grammar=g, seed=seed, **HOT)
        # checked on the bytes, as llama.cpp's matcher reads them: like llama.cpp it decodes UTF-8 without checking
        # for overlong forms or code points past U+10FFFF, so a negated class can let such bytes through
        state = g.step_bytes(g.start_state, tiny.tokenizer.decode_bytes(c.tokens))
        assert state >= 0 and g.end_ok[state] and (c.stop_reason != "eos" or g.eog_ok[state]), str(c)
        if "\ufffd" not in str(c) and c.stop_reason == "eos": assert g.accepts_text(str(c))
    m = GrammarMatcher(g, tiny.tokenizer)                       # the trie walk = each token checked on its own
    for t in c.tokens[:-1]:
        mask = m.mask()
        assert (mask == np.array([m.allows(i) for i in range(tiny.tokenizer.n_vocab)])).all()
        m.accept(t)


def test_chat_json_schema_and_bad_constraints(tiny):
    from llmbook.grammar import Grammar, as_grammar, json_schema_to_grammar
    schema = {"type": "object", "properties": {"k": {"enum": ["x", "y"]}}, "required": ["k"]}
    s = tiny.session()
    c = s.chat("hi", max_tokens=30, grammar=as_grammar(json_schema=schema), **HOT)
    assert Grammar(json_schema_to_grammar(schema)).accepts_text(str(c), complete=c.stop_reason == "eos")
    before = [dict(m) for m in s.messages]
    # a constraint is compiled by the grammars chapter (Part IV): text is refused with the way to compile it
    for text in ('root ::= "a"', {"type": "object"}):
        with pytest.raises(TypeError, match="as_grammar"): s.chat("again", grammar=text)
    with pytest.raises(TypeError, match="matcher"): s.chat("again", grammar=42)
    with pytest.raises(ValueError): s.chat("again", logit_bias={"x": 1.0})
    assert s.messages == before


class Upper:
    "A toy reply format: templates that say 'UPPER' have replies whose text is the reasoning, upper-cased the answer."
    def matches(self, template): return isinstance(template, str) and "UPPER" in template
    def turn(self, steps, tokenizer, details=False, on_done=None):
        for step in steps:
            step.reasoning, step.piece = step.piece, step.piece.upper()
            if details: yield step
            elif step.piece: yield step.piece
        c = steps.result
        c = Completion(c.upper(), c.stop_reason, c.tokens, c.n_prompt, c.prefill_s, c.decode_s, c.n_decoded, c.logprobs,
                       reasoning=str(c))
        if on_done is not None: on_done(c)
        return c


def test_reply_formats_are_a_hook(tmp_path):
    "Chapter 10 knows no reply format: `LLM(reply_formats=)` brings them, `chat` lets the one that matches read the turn."
    from llmbook.generate import LLM
    from llmbook.gguf import GGUFFile
    path = write_random_chat_model(tmp_path / "t.gguf", alphabet=range(256))
    plain, hooked = LLM(GGUFFile(path), n_ctx=128), LLM(GGUFFile(path), n_ctx=128, reply_formats=(Upper(),))
    upper = CHATML_TEMPLATE + "{# UPPER #}"
    msgs = [{"role": "user", "content": "hi"}]
    assert plain.reply_format(upper) is None and hooked.reply_format() is None
    assert isinstance(hooked.reply_format(upper), Upper)
    want = plain.chat(msgs, max_tokens=12, template=upper)
    assert want.reasoning is None and str(want)
    c = hooked.chat(msgs, max_tokens=12, template=upper)
    assert c.tokens == want.tokens and c.reasoning == str(want) and str(c) == str(want).upper()
    steps = list(hooked.chat(msgs, max_tokens=12, template=upper, stream=True, details=True))
    assert "".join(s.reasoning for s in steps) == str(want)
    s = hooked.session()
    assert s.chat(msgs, max_tokens=12, template=upper) == c and s.messages[-1]["content"] == str(c)
