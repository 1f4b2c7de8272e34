"""Make tests/fixtures/greedy_one_page.json from llama.cpp (llama-cpp-python), for the one-page engine
(nbs/1_00_one_page.ipynb) and tests/test_one_page.py.

Run with a Python that has llama-cpp-python (never a dependency of llmbook), from the repository root:

    $REFPY tools/make_one_page_fixture.py --smollm2 PATH/SmolLM2-135M-Instruct.Q4_1.gguf [--n 32]

As tools/make_greedy_fixtures.py does, for each prompt: its ids as llama.cpp tokenizes them (add_bos=True, which
SmolLM2's metadata turns off; `special` says whether control tokens' text such as <|im_start|> is parsed as those
tokens), then llama.cpp's greedy continuation of N tokens (end-of-generation tokens do not stop it), the prompt
evaluated as one batch and each new token one at a time (n_ctx=1024), and at every step the two best token ids,
their logits and the top-2 margin; `n_clear` counts the steps before the first with a margin under 0.5.
"""
import argparse, json, sys
from pathlib import Path
import numpy as np
from llama_cpp import Llama

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "greedy_one_page.json"
CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n")
PROMPTS = [                                   # (text, parse control tokens)
    ("The three primary colors are", False),
    ("1, 2, 3, 4, 5,", False),
    ("def fibonacci(n):\n    ", False),
    ("Once upon a time, in a small village,", False),
    (CHAT.format("What is the capital of Japan?"), True),
    (CHAT.format("Write a haiku about the sea."), True),
    (CHAT.format("Name three planets of the solar system."), True),
]
MARGIN = 0.5

def run(path, n):
    llm = Llama(model_path=str(path), n_ctx=1024, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    cases = []
    for text, special in PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
        llm.reset(); llm.eval(ids)
        cont, margin, top2, top2_logits = [], [], [], []
        for _ in range(n):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            best = np.argsort(-logits, kind="stable")[:2]
            t = int(np.argmax(logits))
            assert t == int(best[0])
            cont.append(t); top2.append([int(i) for i in best]); top2_logits.append([float(logits[i]) for i in best])
            margin.append(float(logits[best[0]] - logits[best[1]]))
            llm.eval([t])
        n_clear = next((i for i, m in enumerate(margin) if m < MARGIN), n)
        cases.append({"prompt": text, "special": special, "ids": ids, "cont": cont, "margin": margin, "top2": top2,
                      "top2_logits": top2_logits, "n_clear": n_clear,
                      "text": llm.detokenize(cont).decode("utf-8", "replace")})
        print(f"  {len(ids):3d} prompt tokens, {n_clear:2d}/{n} clear, min margin {min(margin):.3f}: "
              f"{cases[-1]['text']!r}", file=sys.stderr)
    return {"model": Path(path).name, "n_ctx": 1024, "n": n, "margin": MARGIN,
            "llama_cpp_python": __import__("llama_cpp").__version__, "cases": cases}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", type=Path, required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--n", type=int, default=32, help="greedy steps per prompt")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    a.out.write_text(json.dumps(run(a.smollm2, a.n), indent=1) + "\n")
    print(f"wrote {a.out}", file=sys.stderr)

if __name__ == "__main__":
    main()
