"""Speculative decoding (chapter 16) against llama.cpp's prompt lookup, on the same prompts, greedy.

    python bench/bench_speculative.py [--model PATH] [--threads 2] [--rounds 3] [--refpy PYTHON] [--write]

Four workloads (copy a record out of a text, rewrite a JSON object, continue a list, and a free answer that copies
nothing), each decoded without guesses and with prompt lookup: llmbook's `draft="lookup"` (n-grams of 3..1, up to 7
guesses a pass, adapting) and llama-cpp-python's `LlamaPromptLookupDecoding` (its defaults: n-grams of up to 2, 10
guesses a pass), in a process of its own (`--refpy`: a python with llama-cpp-python; llmbook never imports it).
Rounds alternate between the two engines; each figure is the median over rounds of the decode speed (tokens after
the first, per second of decoding). `same_tokens`: the text with guesses equals the text without, on each engine.
`--write` keeps the table in bench/speculative.json, which chapter 16's page prints.
"""
import argparse, json, os, statistics as st, subprocess, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = ("Order 1042: 3 x red mug, 2 x blue plate, 1 x green bowl. Ship to: 14 Harbour Street, Leith, Edinburgh, EH6 6JJ. "
       "Order 1043: 5 x yellow cup, 1 x red mug. Ship to: 2 Mill Lane, Bath, BA1 1AA.")
WORKLOADS = {
    "extract": f"Here are two orders.\n\n{DOC}\n\nCopy the first order, word for word.",
    "json": 'Rewrite this JSON with the same keys, changing only "city" to "Paris":\n'
            '{"name": "Ada Lovelace", "born": 1815, "city": "London", "field": "mathematics", "known for": "the first program"}',
    "list": "Continue the list: Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday, Monday, Tuesday,",
    "free": "Write a short poem about the sea.",
}
N_TOKENS = 64

REF = r'''
import json, sys, time
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
path, threads, cases = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
out = {}
for draft in (None, "lookup"):
    llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=1024, verbose=False, logits_all=draft is not None,
                draft_model=LlamaPromptLookupDecoding() if draft else None)
    for name, ids in cases.items():
        llm.reset()
        times, text = [], []
        for chunk in llm.create_completion(ids, max_tokens=%d, temperature=0.0, stream=True):
            times.append(time.perf_counter()); text.append(chunk["choices"][0]["text"])
        out[f"{name}/{draft}"] = {"rate": (len(times) - 1) / (times[-1] - times[0]), "text": "".join(text)}
print(json.dumps(out))
''' % N_TOKENS


def ours(m, ids):
    import llmbook
    out = {}
    for name, p in ids.items():
        for draft in (None, "lookup"):
            c = m.generate(p, max_tokens=N_TOKENS, draft=draft, ignore_eos=True)
            out[f"{name}/{draft}"] = {"rate": c.decode_tps, "tokens": c.tokens, "stats": c.speculation}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--refpy", default=os.environ.get("REFPY", "python3"))
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    import llmbook
    from llmbook.model import default_model_path
    from llmbook.runtime import cpu_summary
    path = str(a.model or default_model_path())
    m = llmbook.load(path, n_threads=a.threads)
    ids = {name: [int(t) for t in m.chat_prompt([{"role": "user", "content": text}])]
           for name, text in WORKLOADS.items()}
    ours(m, ids)                                           # warm up
    mine, theirs = [], []
    for r in range(a.rounds):
        out = subprocess.run([a.refpy, "-c", REF, path, str(a.threads), json.dumps(ids)], capture_output=True, text=True)
        if out.returncode: sys.exit(f"llama-cpp-python failed: {out.stderr[-2000:]}")
        theirs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        mine.append(ours(m, ids))
        print(f"round {r + 1} of {a.rounds}", file=sys.stderr)
    rows = []
    for name in WORKLOADS:
        rate = lambda runs, key: st.median(run[key]["rate"] for run in runs)
        same = all(run[f"{name}/lookup"]["tokens"] == run[f"{name}/None"]["tokens"] for run in mine)
        assert same, f"{name}: llmbook's tokens with guesses differ from those without"
        s = mine[-1][f"{name}/lookup"]["stats"]
        rows.append({"workload": name, "guesser": "lookup",
                     "ours_plain": rate(mine, f"{name}/None"), "ours": rate(mine, f"{name}/lookup"),
                     "ours_speedup": rate(mine, f"{name}/lookup") / rate(mine, f"{name}/None"),
                     "accepted": s["accepted"] / max(s["drafted"], 1), "tokens_per_pass": (N_TOKENS - 1) / max(s["passes"], 1),
                     "llamacpp_plain": rate(theirs, f"{name}/None"), "llamacpp": rate(theirs, f"{name}/lookup"),
                     "llamacpp_speedup": rate(theirs, f"{name}/lookup") / rate(theirs, f"{name}/None"),
                     "same_tokens": all(run[f"{name}/lookup"]["text"] == run[f"{name}/None"]["text"] for run in theirs)})
    ref_version = subprocess.run([a.refpy, "-c", "import llama_cpp; print(llama_cpp.__version__)"], capture_output=True, text=True).stdout.strip()
    cpu = cpu_summary()
    result = {"machine": f"{cpu['model']} ({', '.join(cpu['isa'])}), {os.cpu_count()} CPUs", "model": Path(path).name, "threads": a.threads, "n_tokens": N_TOKENS,
              "rounds": a.rounds, "llama_cpp_python": ref_version, "rows": rows}
    print(json.dumps(result, indent=1))
    if a.write: (HERE / "speculative.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
