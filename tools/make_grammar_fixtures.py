"""Make tests/fixtures/grammar_smollm2.json: greedy generation under a grammar through llama.cpp's grammar sampler,
on SmolLM2, with the token mask's size at every step.

Run from the repository root with a Python that has llama-cpp-python (dev only, never a dependency of llmbook):

    $REFPY tools/make_grammar_fixtures.py --smollm2 PATH.gguf [--llmbook-python .venv/bin/python]

The grammars are GBNF text; those made from JSON Schemas come from our own `json_schema_to_grammar` (run with the
project's Python), so both engines read the same text. At each step: llama.cpp's grammar sampler is applied to
every token of the vocabulary (the mask: how many tokens stay finite, and a hash of their ids), the greedy token
among the allowed ones is taken (for greedy, llama.cpp's sample-then-check gives the same token), and the margin
between the two best allowed logits is kept, so the test knows which picks rounding could change.
"""
import argparse, ctypes, hashlib, json, subprocess, sys
from pathlib import Path
import numpy as np
import llama_cpp as L
from llama_cpp import Llama

SCHEMAS = {
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                                                "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
               "required": ["name", "age"], "additionalProperties": False},
    "colors": {"type": "object", "properties": {"colors": {"type": "array", "minItems": 2, "maxItems": 4,
                                                           "items": {"enum": ["red", "green", "blue", "yellow"]}}},
               "required": ["colors"]},
}
GBNF = {
    "yes_no": 'root ::= ("yes" | "no") "."',
    "list": 'root ::= item{2,3}\nitem ::= "- " [A-Z] [a-z ]{1,30} "\\n"   # a short bulleted list',
    "unicode": 'root ::= "Temp: " [0-9]{1,3} ("°C" | "°F") " → " [^\\n\\x00-\\x1F]{0,20} "\\n"',
}
PROMPTS = {
    "person": "Give a JSON object describing a person, with keys name and age.",
    "colors": "Name the three primary colors as JSON.",
    "json_object": "Describe a cat as a JSON object.",
    "yes_no": "Is the sky blue? Answer yes or no.",
    "list": "List three fruits.",
    "unicode": "What is the temperature in Paris today? Make one up.",
}
MAX_STEPS = 40

def grammar_texts(python):
    code = ("import json, sys; from llmbook.grammar import json_schema_to_grammar, JSON_OBJECT_GRAMMAR; "
            "s = json.loads(sys.stdin.read()); "
            "print(json.dumps({**{k: json_schema_to_grammar(v) for k, v in s.items()}, 'json_object': JSON_OBJECT_GRAMMAR}))")
    out = subprocess.run([python, "-c", code], input=json.dumps(SCHEMAS), capture_output=True, text=True, check=True)
    return {**json.loads(out.stdout), **GBNF}

def run(path, texts):
    llm = Llama(model_path=str(path), n_ctx=1024, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    vocab, n = L.llama_model_get_vocab(llm.model), llm.n_vocab()
    data = (L.llama_token_data * n)()
    cases = []
    for name, text in texts.items():
        prompt = f"<|im_start|>user\n{PROMPTS[name]}<|im_end|>\n<|im_start|>assistant\n"
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        grammar = L.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        assert grammar, name
        llm.reset(); llm.eval(ids)
        tokens, n_allowed, allowed_sha, margin = [], [], [], []
        for _ in range(MAX_STEPS):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            for i in range(n): data[i].id, data[i].logit, data[i].p = i, float(logits[i]), 0.0
            arr = L.llama_token_data_array(data=ctypes.cast(data, L.llama_token_data_p), size=n, selected=-1, sorted=False)
            L.llama_sampler_apply(grammar, ctypes.byref(arr))
            masked = np.array([data[i].logit for i in range(n)], dtype=np.float32)
            ok = np.flatnonzero(np.isfinite(masked))
            n_allowed.append(int(len(ok)))
            allowed_sha.append(hashlib.sha256(ok.astype(np.int64).tobytes()).hexdigest()[:16])
            best = np.sort(masked[ok])[-2:]
            margin.append(float(best[-1] - best[-2]) if len(best) > 1 else 1e9)
            t = int(np.argmax(masked))
            tokens.append(t)
            L.llama_sampler_accept(grammar, t)
            if t in (llm.token_eos(),) or L.llama_vocab_is_eog(vocab, t): break
            llm.eval([t])
        L.llama_sampler_free(grammar)
        txt = llm.detokenize(tokens).decode("utf-8", "replace")
        print(f"{name}: {len(tokens)} tokens, allowed {n_allowed[:6]}...: {txt!r}", file=sys.stderr)
        cases.append(dict(name=name, grammar=text, ids=ids, tokens=tokens, n_allowed=n_allowed,
                          allowed_sha=allowed_sha, margin=margin, text=txt))
    return dict(source=f"llama-cpp-python {L.__version__}", model=Path(path).name, cases=cases)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", type=Path, required=True)
    ap.add_argument("--llmbook-python", default=".venv/bin/python")
    a = ap.parse_args()
    out = Path("tests/fixtures/grammar_smollm2.json")
    out.write_text(json.dumps(run(a.smollm2, grammar_texts(a.llmbook_python)), indent=1))
    print("wrote", out, file=sys.stderr)
