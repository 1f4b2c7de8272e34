"""The demo app (chapter 25) on a tiny random model, without a notebook: the HTML and the chips it draws, the
candidates it lists, a completion and a chat driven through its widgets, and the errors it shows instead of
raising. (tests/test_demo.py runs the chapter itself on the real model; tests/test_browser_demo.py runs it in
JupyterLab.)"""
import html
import numpy as np
import pytest
import ipywidgets as W
from llmbook.demo import (App, _prob_color, _text_html, _chip_label, _token_chip, _line_break, _candidates_html,
                          _parse_seed, _transcript)
from llmbook.generate import TokenStep
from llmbook.loading import load
from llmbook.testmodels import write_random_chat_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load(write_random_chat_model(tmp_path_factory.mktemp("demo") / "tiny.gguf"), n_ctx=256)


def rec(i, piece, p): return TokenStep(i, piece, (np.array([i]), np.array([p], np.float32)), p)

MADE_UP = [rec(1, "The", 0.97), rec(2, " cat", 0.42), rec(3, " <sat>", 0.06), rec(4, "\n", 0.8), rec(5, "", 0.5), rec(6, "on", 0.9)]


def test_prob_color():
    assert _prob_color(1.0) == "hsl(120, 80%, 94%)" and _prob_color(0.0) == "hsl(0, 80%, 62%)"
    assert _prob_color(2.0) == _prob_color(1.0) and _prob_color(-1) == _prob_color(0)   # clipped, never a bad colour


def test_text_html_escapes_and_selects():
    h = _text_html(MADE_UP, prompt="Once: <b>")
    assert "&lt;sat&gt;" in h and "<sat>" not in h and "&lt;b&gt;" in h            # escaped, never interpreted
    assert h.count("<span") == len(MADE_UP) + 1 and "outline" not in h               # + the grey prompt
    assert _text_html(MADE_UP, selected=2).count("outline") == 1
    assert _text_html([], tail="x<y").endswith("x&lt;y</div>")


def test_chips():
    clicked = []
    chips = [_token_chip(i, r, clicked.append) for i, r in enumerate(MADE_UP)]
    assert [c.description for c in chips] == ["The", "\u00a0cat", "\u00a0<sat>", "↵", "∅", "on"]
    assert _chip_label("\t") == "⇥"
    chips[2].click()
    assert clicked == [2] and chips[0].style.button_color == _prob_color(0.97)
    assert isinstance(_line_break(), W.Box)


def test_candidates_html(tiny):
    steps = [s for s in tiny.generate("the cat", max_tokens=6, temperature=1.0, top_k=5, seed=1, ignore_eos=True,
                                      stream=True, details=True) if s.token is not None]
    for s in steps:
        ids, probs = s.candidates
        assert len(ids) <= 5 and probs.sum() <= 1 + 1e-5 and np.all(np.diff(probs) <= 0)   # most likely first
        assert s.token in ids and np.isclose(s.prob, probs[ids == s.token][0])
    h = _candidates_html(steps[0], tiny.tokenizer, index=0)
    assert "▶" in h and "token #0" in h and "was drawn with" in h
    more = next(s for s in steps if len(s.candidates[0]) > 2)
    assert "more" in _candidates_html(more, tiny.tokenizer, top=2)


def test_parse_seed_and_transcript():
    assert _parse_seed(" 42 ") == 42 and _parse_seed("") is None
    for bad in ("abc", "-1", str(2**32), "1.5"):
        with pytest.raises(ValueError, match="seed"): _parse_seed(bad)
    assert _transcript([], "Hi") == "user: Hi\n\nassistant: "
    assert _transcript([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "c") == \
        "user: a\n\nassistant: b\n\nuser: c\n\nassistant: "


def test_completion_is_what_generate_makes(tiny):
    t = App(tiny)
    t.prompt.value, t.mode.value, t.max_tokens.value, t.temperature.value, t.top_k.value, t.seed.value = \
        "the cat", "completion", 12, 1.0, 8, "7"
    t.generate_button.click()
    assert t.wait(60) and t.error is None, t.error
    same = [s for s in tiny.generate("the cat", max_tokens=12, temperature=1.0, top_k=8, seed=7, stream=True, details=True)
            if s.token is not None]
    assert [s.token for s in t.steps] == [s.token for s in same] and [s.prob for s in t.steps] == [s.prob for s in same]
    assert t.result.stop_reason in ("eos", "length") and len(t.steps) <= 12
    assert t.generate_button.disabled is False and t.stop_button.disabled is True     # ready for the next click
    assert all(html.escape(s.piece) in t.text.value for s in t.steps)
    t.boundaries.value = True                  # the chips view: one button per token
    assert len(t.token_buttons) == len(t.steps)
    t.token_buttons[3].click()
    assert t.token_picker.value == 3 and "token #3" in t.candidates.value
    assert t.text.layout.display == "none" and t.chips.layout.display == "flex"
    t.close()


def test_chat_turns_and_new_chat(tiny):
    c = App(tiny)
    c.temperature.value, c.max_tokens.value = 1.0, 8
    for message in ("hello", "and then?"):
        c.prompt.value = message
        c.generate_button.click()
        assert c.wait(60) and c.error is None, c.error
    assert [m["role"] for m in c.session.messages] == ["user", "assistant", "user", "assistant"]
    assert "user: hello" in c.text.value and "user: and then?" in c.text.value
    c.new_chat_button.click()
    assert c.session.messages == [] and c.steps == [] and "user:" not in c.text.value
    c.close()


def test_errors_are_shown_not_raised(tiny):
    for setup in (lambda a: setattr(a.prompt, "value", "   "), lambda a: setattr(a.seed, "value", "twelve")):
        a = App(tiny); setup(a)
        a.generate_button.click()
        assert not a.running and isinstance(a.error, ValueError) and "Error" in a.status.value
        a.close()
    missing = App("no-such-model.gguf")
    missing.prompt.value = "hello"
    missing.generate_button.click()
    assert missing.wait(30) and isinstance(missing.error, FileNotFoundError), missing.error
    assert "Error" in missing.status.value and "no-such-model.gguf" in html.unescape(missing.status.value)
    missing.close()
