"""The demo app (chapter 25) driven headlessly: nbclient runs the whole notebook (its `#| slow` cells too, so the
app `app` holds the default SmolLM2), then the cells below drive that app through its widgets in the same kernel:
text streams in, the probabilities shown are the sampler's, Stop ends a long generation, and the kernel stays free
while the app generates."""
from pathlib import Path
import textwrap
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "nbs" / "4_25_demo.ipynb"

STREAMS_AND_MATCHES_THE_SAMPLER = """
import html, time
import numpy as np
from llmbook.sampling import Sampler, SamplerSettings
prompt = "The three primary colors are"
app.mode.value, app.prompt.value, app.max_tokens.value = "completion", prompt, 24
app.temperature.value, app.top_k.value, app.top_p.value, app.min_p.value = 0.9, 40, 0.95, 0.05
app.repeat_penalty.value, app.seed.value = 1.1, "123"
app.redraw_every = 0.0                                   # redraw at every token, to see the text grow
seen = []
app.text.observe(lambda change: seen.append(len(app.steps)), names="value")
t0 = time.perf_counter(); app.generate_button.click(); click_s = time.perf_counter() - t0
assert click_s < 1.0, f"the click handler took {click_s:.2f} s: it must only start the thread"
assert app.wait(300) and app.error is None, app.error
steps = app.steps
text = "".join(s.piece for s in steps) + app.tail
assert text.strip(), "no text was generated"
assert any(0 < n < len(steps) for n in seen), f"the text view was never redrawn before the end: {seen}"
assert html.escape(prompt) in app.text.value and all(html.escape(s.piece) in app.text.value for s in steps)
assert app.result is not None and app.result.stop_reason in ("eos", "length") and str(app.result) == text
assert "stopped:" in app.status.value and "tokens/s" in app.status.value

# replay the generation with chapter 09's sampler on the model's own logits: same tokens, same candidates
m = app.model
ids = m.tokenizer.encode(prompt, add_special=True, parse_special=True)
cache = m.new_cache(len(ids) + len(steps) + 1)
logits = m.forward(ids, cache, n_out=1)[-1]
history = list(ids)
sampler = Sampler(SamplerSettings(temperature=0.9, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1, seed=123))
for i, s in enumerate(steps):
    cand_ids, cand_probs = s.candidates
    assert 0 < cand_probs.sum() <= 1 + 1e-5, (i, cand_probs.sum())
    token = sampler.sample(logits, history)
    ref_ids, ref_probs = sampler.last_candidates
    assert token == s.token, (i, token, s.token)
    assert np.array_equal(ref_ids, cand_ids), i
    assert np.allclose(ref_probs, cand_probs, rtol=1e-5, atol=1e-7), i
    assert np.isclose(s.prob, ref_probs[ref_ids == token][0]), i
    history.append(token)
    logits = m.forward([token], cache)[-1]
app.token_picker.value = len(steps) - 1
assert f"token #{len(steps) - 1}" in app.candidates.value and "▶" in app.candidates.value
print("replayed", len(steps), "tokens")
"""

START_A_LONG_GENERATION = """
app.mode.value, app.prompt.value, app.max_tokens.value = "completion", "Once upon a time", 1024
app.temperature.value, app.seed.value, app.redraw_every = 1.0, "5", 0.1
app.ignore_eos = True                                    # keep going: only Stop (or 1024 tokens) ends it
app.generate_button.click()
assert app.running and app.stop_button.disabled is False and app.generate_button.disabled is True
"""

KERNEL_FREE_WHILE_GENERATING = """
deadline = time.time() + 300
while len(app.steps) < 8 and app.running and time.time() < deadline: time.sleep(0.05)
assert app.running, f"the generation ended before Stop: {app.result!r} {app.error!r}"
n_at_stop = len(app.steps)
app.stop_button.click()
assert app.wait(60), "Stop did not end the generation"
assert app.result.stop_reason == "cancelled", app.result.stop_reason
assert len(app.steps) <= n_at_stop + 1, (n_at_stop, len(app.steps))      # at most the token being made
assert len(app.steps) < 1024 and "you pressed Stop" in app.status.value
assert app.generate_button.disabled is False and app.stop_button.disabled is True
app.ignore_eos = False
print("stopped after", len(app.steps), "tokens")
"""

def test_demo_notebook_drives_the_app():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    n_book = len(nb.cells)
    for src in (STREAMS_AND_MATCHES_THE_SAMPLER, START_A_LONG_GENERATION, KERNEL_FREE_WHILE_GENERATING):
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(src)))
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"a cell failed:\n{e}")
    outputs = "".join(o.get("text", "") for c in nb.cells[n_book:] for o in c.get("outputs", []))
    assert "replayed" in outputs and "stopped after" in outputs, outputs
