"""Make tests/fixtures/greedy_<model>.json from llama.cpp (llama-cpp-python), for tests/test_generate_real.py
and tests/test_cli_generate.py.

Run with a Python that has llama-cpp-python (never a dependency of llmbook):

    $REFPY tools/make_greedy_fixtures.py --smollm2 PATH.gguf --gemma3 PATH.gguf

For each prompt, as the project's judge does (shared/tools/ref.py `greedy`): the prompt's ids (add_bos=True,
special=False), llama.cpp's greedy continuation of N_CONT tokens evaluated one at a time after a batched prompt
(n_ctx=1024), the top-2 logit margin at every step, and the text of the continuation as llama.cpp prints it
(the pieces of the tokens joined, leading space kept), for the part before the first step with a margin under
0.5 (`n_clear` tokens), where the greedy choice is not decided by rounding.
"""
import json, sys
from pathlib import Path
import numpy as np
from llama_cpp import Llama
from fixture_models import each_model

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
PROMPTS = [
    "The three primary colors are",
    "Monday, Tuesday, Wednesday,",
    "1, 2, 3, 4, 5,",
    "The quick brown fox jumps over the lazy",
    "Water boils at a temperature of",
    "<|im_start|>user\nWhat is the capital of Japan?<|im_end|>\n<|im_start|>assistant\n",   # control tokens' text, as text
]
N_CONT = 24
MARGIN = 0.5

def run_model(path):
    llm = Llama(model_path=str(path), n_ctx=1024, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    cases = []
    for p in PROMPTS:
        ids = llm.tokenize(p.encode("utf-8"), add_bos=True, special=False)
        llm.reset(); llm.eval(ids)
        cont, margin = [], []
        for _ in range(N_CONT):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            top2 = np.partition(logits, -2)[-2:]
            t = int(np.argmax(logits))
            cont.append(t); margin.append(float(top2[1] - top2[0]))
            llm.eval([t])
        n_clear = next((i for i, m in enumerate(margin) if m < MARGIN), N_CONT)
        text = llm.detokenize(cont[:n_clear]).decode("utf-8", "replace")
        cases.append({"prompt": p, "ids": ids, "cont": cont, "margin": margin, "n_clear": n_clear, "text": text})
        print(f"  {len(ids):3d} prompt tokens, {n_clear:2d} clear: {text!r}", file=sys.stderr)
    return {"model": Path(path).name, "n_ctx": 1024, "margin": MARGIN,
            "llama_cpp_python": __import__("llama_cpp").__version__, "cases": cases}

def main():
    for name, path in each_model(__doc__.splitlines()[0]):
        out = OUT / f"greedy_{name}.json"
        out.write_text(json.dumps(run_model(path), indent=1))
        print(f"wrote {out}", file=sys.stderr)

if __name__ == "__main__":
    main()
