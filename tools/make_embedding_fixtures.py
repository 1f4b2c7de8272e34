"""Make tests/fixtures/embeddings_<model>.json from llama.cpp (llama-cpp-python), for tests/test_embed.py.

Run with a Python that has llama-cpp-python (never a dependency of llmbook), from the repository root:

    $REFPY tools/make_embedding_fixtures.py --smollm2 PATH.gguf --gemma3 PATH.gguf

For each pooling llama.cpp offers a decoder model (mean: the average of the last layer's normalized hidden states
over the tokens; last: the last token's), each text's token ids as llama.cpp's `embed` tokenizes them
(add_bos=True, special=False) and its embedding, L2-normalized (`embed(..., normalize=True)`), rounded to 6 digits.
llama.cpp's own spread: the same embeddings again with an f32 KV cache (llama.cpp's default is f16) and one thread,
and the cosine of each to the first (`self_cosine`); the test's bar comes from it where it is below 0.999.
"""
import json, sys
from pathlib import Path
import numpy as np
import llama_cpp
from llama_cpp import Llama
from fixture_models import each_model

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
TEXTS = [
    "The cat sat on the mat.",
    "A kitten was sitting on the rug.",
    "Quarterly revenue grew by 12 percent, driven by cloud services.",
    "Water boils at 100 degrees Celsius at sea level.",
]
POOLINGS = {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "last": llama_cpp.LLAMA_POOLING_TYPE_LAST}

def llama(path, kind, f32_cache=False):
    extra = dict(type_k=0, type_v=0, n_threads=1, n_threads_batch=1) if f32_cache else dict(n_threads=2, n_threads_batch=2)
    return Llama(model_path=str(path), embedding=True, pooling_type=kind, n_ctx=512, n_batch=512, n_ubatch=512,
                 verbose=False, **extra)

def run_model(path) -> dict:
    out = {"model": Path(path).name, "llama_cpp_python": llama_cpp.__version__, "texts": TEXTS, "poolings": {}}
    for name, kind in POOLINGS.items():
        llm, other = llama(path, kind), llama(path, kind, f32_cache=True)
        rows = []
        for t in TEXTS:                  # one text per call: each its own sequence
            e = np.asarray(llm.embed(t, normalize=True), dtype=np.float64)
            assert e.ndim == 1, e.shape
            e2 = np.asarray(other.embed(t, normalize=True), dtype=np.float64)
            ids = llm.tokenize(t.encode("utf-8"), add_bos=True, special=False)
            rows.append({"ids": ids, "embedding": [round(float(v), 6) for v in e], "self_cosine": round(float(e @ e2), 6)})
        out["poolings"][name] = rows
        sims = np.array([[np.dot(a["embedding"], b["embedding"]) for b in rows] for a in rows])
        print(f"  {name}: n_embd {len(rows[0]['embedding'])}, cosines of the texts:\n{np.round(sims, 3)}", file=sys.stderr)
        print(f"  {name}: llama.cpp f16 vs f32 cache, cosines {[r['self_cosine'] for r in rows]}", file=sys.stderr)
        del llm, other
    return out

def main():
    for name, path in each_model(__doc__.splitlines()[0]):
        out = OUT / f"embeddings_{name}.json"
        out.write_text(json.dumps(run_model(path)) + "\n")
        print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)

if __name__ == "__main__":
    main()
