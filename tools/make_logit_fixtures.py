"""Make tests/fixtures/logits_<model>.json from llama.cpp (llama-cpp-python), for tests/test_model_parity.py.

Run with a Python that has llama-cpp-python (never a dependency of llmbook):

    $REFPY tools/make_logit_fixtures.py --smollm2 PATH.gguf --gemma3 PATH.gguf

For each prompt: the token ids (add_bos=True, special=False, as the project's judge does), llama.cpp's greedy
continuation evaluated one token at a time after a batched prompt (n_ctx=1024, logits_all=True), at every
predicting position the top-2 margin and the top-20 ids/logits, and for a few positions the full logit vector
as base64 float16 (for the cosine-similarity check).
"""
import base64, json, sys
from pathlib import Path
import numpy as np
from llama_cpp import Llama
from fixture_models import each_model

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "fixtures"

# Varied prompts: facts, code, story, arithmetic, a list, non-English; the long one (> 512 tokens)
# makes Gemma 3's sliding-window layers actually slide.
LONG = (
    "The history of printing begins long before Gutenberg. In China, artisans carved whole pages of text into "
    "wooden blocks, inked them, and pressed paper onto the surface; the oldest dated printed book that survives, "
    "a copy of the Diamond Sutra, was made this way in the year 868. Around 1040 an artisan named Bi Sheng made "
    "movable type from baked clay, and later printers in Korea cast type in bronze. In Europe the decisive step "
    "came in the middle of the fifteenth century in Mainz, where Johannes Gutenberg combined several inventions: "
    "a hand mould for casting many identical letters quickly from an alloy of lead, tin and antimony; an oil-based "
    "ink that stuck to metal; and a screw press adapted from the presses used for wine and olive oil. His Bible, "
    "finished around 1455, showed that a machine could produce books as beautiful as those copied by hand. "
    "Within fifty years presses were working in more than two hundred European cities, and millions of books had "
    "been printed. Prices fell, literacy spread, and scholars could compare identical copies of the same text, "
    "which made errors easier to find and correct. The Reformation, the scientific revolution and the rise of "
    "newspapers all depended on cheap printed paper. For the next three centuries the technology changed "
    "surprisingly little. Then, in the early nineteenth century, iron presses replaced wooden ones, and steam "
    "power drove cylinder presses that printed thousands of sheets an hour. Paper made from wood pulp replaced "
    "paper made from rags, and it became cheap enough for daily newspapers sold for a penny. Typesetting remained "
    "slow, because each letter still had to be picked from a case by hand, until the Linotype machine of 1886 let "
    "an operator cast a whole line of type from a keyboard. In the twentieth century offset lithography, "
    "phototypesetting and finally desktop publishing on personal computers transformed the trade again, and "
    "today most text is never printed at all, but read on screens. Yet the basic idea of printing, making many "
    "identical copies of a text so that many people can read it, remains one of the most important inventions "
    "in human history. Historians still argue about how much each of these changes mattered. Some say that the "
    "press caused the great movements of early modern Europe; others answer that printing only sped up changes "
    "that were already under way, in trade, in cities and in universities. What nobody disputes is the scale: "
    "before the press, a large library held a few hundred manuscripts; a century after it, a merchant could own "
    "more books than a medieval king. The same pattern repeated with every later medium. Radio, television and "
    "the internet each made copying cheaper, reached more people, and provoked the same hopes and the same fears. "
    "In summary, the main stages in the history of printing are"
)
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "Question: What is 17 times 23?\nAnswer:",
    "Les chats sont des animaux",
    LONG,
]
N_CONT = 32
# (prompt index, continuation step) pairs whose full logit vector is stored; Gemma's 262k vocab costs 0.7 MB each
FULL_AT = {"smollm2": [(i, s) for i in range(len(PROMPTS)) for s in (0, 16)], "gemma3": [(0, 0), (3, 0), (5, 0)]}
TOPK = 20

def b64_f16(x):
    return base64.b64encode(np.asarray(x, dtype=np.float16).tobytes()).decode("ascii")

def run_model(path, full_at):
    llm = Llama(model_path=str(path), n_ctx=1024, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    cases = []
    for k, p in enumerate(PROMPTS):
        ids = llm.tokenize(p.encode("utf-8"), add_bos=True, special=False)
        llm.reset(); llm.eval(ids)
        cont, margin, top_ids, top_logits, full = [], [], [], [], []
        for i in range(N_CONT):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            order = np.argsort(-logits)[:TOPK]
            t = int(order[0])
            cont.append(t); margin.append(float(logits[order[0]] - logits[order[1]]))
            top_ids.append(order.tolist()); top_logits.append([round(float(v), 4) for v in logits[order]])
            if (k, i) in full_at: full.append({"step": i, "f16": b64_f16(logits)})
            llm.eval([t])
        cases.append({"prompt": p, "ids": ids, "cont": cont, "margin": margin,
                      "top_ids": top_ids, "top_logits": top_logits, "full": full})
        print(f"  {len(ids):4d} prompt tokens, continuation {cont[:8]}..., min margin {min(margin):.3f}", file=sys.stderr)
    return {"model": Path(path).name, "n_vocab": int(llm.n_vocab()), "n_ctx": 1024,
            "llama_cpp_python": __import__("llama_cpp").__version__, "cases": cases}

def main():
    for name, path in each_model(__doc__.splitlines()[0]):
        out = OUT / f"logits_{name}.json"
        out.write_text(json.dumps(run_model(path, FULL_AT[name]), separators=(",", ":")))
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)

if __name__ == "__main__":
    main()
