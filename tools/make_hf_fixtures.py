"""Make tests/fixtures/hf_llamacpp.json: llama.cpp's logits on the GGUF files that `llmbook.hf.convert` writes
from the default model exported as a Hugging Face checkpoint (tests/test_hf.py compares ours with them).

Run with the project's Python (it has llmbook); llama.cpp runs in another Python that has llama-cpp-python:

    REFPY=/path/to/python-with-llama_cpp .venv/bin/python tools/make_hf_fixtures.py

For each file type (F16, Q8_0) and prompt: the token ids llama.cpp makes of the prompt (no BOS, as SmolLM2's
tokenizer adds none), the sha256 of the converted file (the conversion is deterministic: the test checks it
wrote the same bytes), and at every position the top-10 ids and logits and the margin between the first two.
"""
import hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "fixtures" / "hf_llamacpp.json"
PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Once upon a time, there was a little"]
TYPES = ["F16", "Q8_0"]

LLAMA_CPP = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
path, prompts = sys.argv[1], json.loads(sys.argv[2])
m = Llama(path, n_ctx=256, logits_all=True, verbose=False, n_threads=2)
out = []
for p in prompts:
    ids = m.tokenize(p.encode(), add_bos=False, special=False)
    m.reset(); m.eval(ids)
    logits = np.array(m.scores[:len(ids)], dtype=np.float32)
    top = np.argsort(-logits, axis=-1)[:, :10]
    out.append({"prompt": p, "ids": ids, "top_ids": top.tolist(),
                "top_logits": np.take_along_axis(logits, top, -1).round(4).tolist(),
                "margin": (np.take_along_axis(logits, top[:, :1], -1) - np.take_along_axis(logits, top[:, 1:2], -1))[:, 0].round(4).tolist()})
print(json.dumps(out))
"""

def main():
    refpy = os.environ.get("REFPY")
    if not refpy: sys.exit("set REFPY to a Python that has llama-cpp-python")
    sys.path.insert(0, str(HERE.parent))
    from llmbook.hf import export_hf, convert
    from llmbook.model import default_model_path
    fixture = {"source": default_model_path().name, "types": {}}
    with tempfile.TemporaryDirectory() as tmp:
        d = export_hf(default_model_path(), Path(tmp) / "SmolLM2-135M-Instruct")
        for t in TYPES:
            gguf = convert(d, Path(tmp) / f"smollm2-{t}.gguf", t).path
            r = subprocess.run([refpy, "-c", LLAMA_CPP, str(gguf), json.dumps(PROMPTS)], capture_output=True, text=True)
            if r.returncode: sys.exit(f"llama.cpp failed on {gguf}:\n{r.stderr[-3000:]}")
            fixture["types"][t] = {"sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
                                   "prompts": json.loads(r.stdout.strip().splitlines()[-1])}
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")

if __name__ == "__main__":
    main()
