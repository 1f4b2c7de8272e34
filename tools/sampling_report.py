"""How far free-running generation on SmolLM2 follows llama.cpp's sampled tokens (tests/fixtures/sampling_smollm2.json).

    python tools/sampling_report.py                  # every kernel set this CPU has
    python tools/sampling_report.py --kernels float

A report, not a test: past llama.cpp's first close pick (a draw's u within SAFE_P of its interval's edge, or a greedy
top-2 gap under SAFE_LOGIT), our logits, which differ from llama.cpp's by float rounding, may pick another token, and
from there on the two texts are different texts. How many tokens still agree depends on the rounding, so it is printed,
not asserted. What is asserted lives in tests/test_sampling_real.py: the safe prefix of every case
(`test_same_tokens_as_llama_cpp`) and every safe pick with llama.cpp's history (`test_each_safe_pick_with_llama_cpp_history`).

For each case this prints the tokens equal to llama.cpp's before the first difference, the safe prefix, and at the
first difference llama.cpp's own margin there (small: the pick was close).
"""
import argparse, json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_sampling_real import SAFE_P, SAFE_LOGIT, n_safe  # noqa: E402  (the test's margins, one definition)
from llmbook.loading import load  # noqa: E402
from llmbook.int8 import kernel_set  # noqa: E402

def report(kernels: str, fixture: dict):
    m = load(None, n_ctx=fixture["n_ctx"], kernels=kernels)
    print(f"kernels {kernels}:")
    for case in fixture["cases"]:
        s = dict(case["settings"]); s.pop("min_keep")
        s["logit_bias"] = {t: b for t, b in s["logit_bias"]} or None
        c = m.generate(case["ids"], max_tokens=len(case["tokens"]), ignore_eos=True, **s)
        want = case["tokens"]
        same = next((i for i, (a, b) in enumerate(zip(c.tokens, want)) if a != b), len(want))
        bar = SAFE_LOGIT if s["temperature"] == 0 else SAFE_P
        at = (f"; first difference at step {same}, llama.cpp's margin there {case['safety'][same]:.3g} (bar {bar})"
              if same < len(want) else "")
        print(f"  {case['prompt'][:30]!r}: {same}/{len(want)} tokens the same, {n_safe(case)} safe{at}")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", choices=["avx2", "float"], action="append",
                    help="a kernel set (repeatable; default: float, and avx2 where the CPU has it)")
    args = ap.parse_args(argv)
    fixture = json.loads((ROOT / "tests" / "fixtures" / "sampling_smollm2.json").read_text())
    sets = args.kernels or (["avx2", "float"] if kernel_set("auto") == "avx2" else ["float"])
    for k in sets: report(k, fixture)
    return 0

if __name__ == "__main__":
    sys.exit(main())
