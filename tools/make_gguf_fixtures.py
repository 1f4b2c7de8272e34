"""Make tests/fixtures/gguf_llamacpp.json: does llama.cpp load a GGUF file written by llmbook's GGUFWriter?

Run with a Python that has llama-cpp-python (never a dependency of llmbook) and numpy:

    $REFPY tools/make_gguf_fixtures.py --smollm2 PATH/SmolLM2-135M-Instruct.Q4_1.gguf

`rewrite()` copies SmolLM2 with our writer but lays it out differently from the original (alignment 64,
tensors in reverse order, extra metadata of every scalar and array type). llama.cpp loads the original
and the copy, evaluates the same prompt in both, and we record: the copy's sha256 (so that the test can
check that the writer still writes exactly this file), the largest logit difference (0 when llama.cpp
read every tensor from the right place) and llama.cpp's own rendering of the extra metadata.
llmbook.gguf is loaded without the package's __init__ (which may import numba, absent from REFPY).
"""
import argparse, hashlib, json, sys, tempfile, types
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "gguf_llamacpp.json"
PROMPT = "The capital of France is"

# extra keys: (value, GGUF value type name or array spec) -- every scalar type and arrays of several
EXTRA = {
    "llmbook.test.u8": (200, "UINT8"), "llmbook.test.i8": (-100, "INT8"),
    "llmbook.test.u16": (60000, "UINT16"), "llmbook.test.i16": (-30000, "INT16"),
    "llmbook.test.u32": (4000000000, "UINT32"), "llmbook.test.i32": (-2000000000, "INT32"),
    "llmbook.test.u64": (2**63 + 5, "UINT64"), "llmbook.test.i64": (-2**62, "INT64"),
    "llmbook.test.f32": (0.15625, "FLOAT32"), "llmbook.test.f64": (0.1, "FLOAT64"),
    "llmbook.test.bool": (True, "BOOL"), "llmbook.test.str": ("héllo wörld", "STRING"),
    "llmbook.test.strs": (["a", "bb", "ccc"], ["ARRAY", "STRING"]),
    "llmbook.test.f32s": ([0.5, -1.25], ["ARRAY", "FLOAT32"]),
    "llmbook.test.i32s": ([1, -2, 3], ["ARRAY", "INT32"]),
}


def import_gguf_module():
    if "llmbook" not in sys.modules:
        pkg = types.ModuleType("llmbook"); pkg.__path__ = [str(ROOT / "llmbook")]
        sys.modules["llmbook"] = pkg
    import llmbook.gguf
    return llmbook.gguf


def spec_of(g, s):
    return g.GGUFValueType[s] if isinstance(s, str) else (g.GGUFValueType[s[0]], g.GGUFValueType[s[1]])


def rewrite(src: Path, dst: Path, g=None) -> Path:
    "SmolLM2 through our writer: alignment 64, tensors reversed, EXTRA keys appended."
    g = g or import_gguf_module()
    f = g.GGUFFile(src)
    w = g.GGUFWriter(dst, alignment=64)
    for k, v in f.metadata.items(): w.add(k, v, f.metadata_types[k])
    for k, (v, s) in EXTRA.items(): w.add(k, v, spec_of(g, s))
    for name in reversed(list(f.tensors)): w.add_tensor(name, f.qtensor(name))
    return w.write()


def sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""): h.update(chunk)
    return h.hexdigest()


def llama_logits(path: Path):
    from llama_cpp import Llama
    llm = Llama(model_path=str(path), n_ctx=64, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=False)
    llm.reset(); llm.eval(ids)
    return ids, np.array(llm.scores[:len(ids)], dtype=np.float32), dict(llm.metadata)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smollm2", required=True, type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        copy = rewrite(args.smollm2, Path(d) / "rewritten.gguf")
        ids, ref, _ = llama_logits(args.smollm2)
        ids2, got, meta = llama_logits(copy)
        result = {
            "source": args.smollm2.name, "source_sha256": sha256(args.smollm2),
            "rewritten_sha256": sha256(copy), "rewritten_bytes": copy.stat().st_size,
            "prompt": PROMPT, "tokens": ids, "tokens_rewritten": ids2,
            "max_abs_logit_diff": float(np.abs(ref - got).max()),
            "llama_cpp_metadata": {k: meta.get(k) for k in EXTRA},
        }
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
