"""Write a random-weight GGUF shaped like Qwen3-30B-A3B, 8 layers instead of 48, in Q4_K_M, for speed benchmarks of
the mixture of experts (issue 28; nbs/3_19_moe.ipynb).

Why: Qwen3-30B-A3B is the mixture-of-experts model CPU users run; its speed depends on its per-layer shapes and its
tensor types, not on the weights' values. Each layer here is the real one: n_embd 2048, 32 query and 4 KV heads of
128, 128 experts of 768 with 8 used per token, the router in F32; llama.cpp's Q4_K_M mix (Q6_K for attn_v and
ffn_down_exps of the first and last eighth of the layers and every third between, Q6_K output, Q4_K elsewhere). The
tokenizer is SmolLM2's (byte-level BPE, chat template), padded with reserved control tokens to Qwen3's 151936 ids
so that the embedding and output head have the real size. The text it makes is gibberish: speed only.
About 3 GB, never committed.

    .venv/bin/python bench/make_qwen3moe.py [OUT.gguf] [--layers 8]   # default /work/models/qwen3moe-8l-q4_k_m.gguf

The whole file is held in memory once before it is written (about its size); the numpy quantizer makes it in
roughly 10 minutes on 2 cores.
"""
import argparse, time
from collections import Counter
from pathlib import Path
from llmbook.gguf import GGUFFile
from llmbook.moe import write_qwen3moe
from llmbook.quantize import quantize        # the K-quants (chapter 21)

# Qwen3-30B-A3B (config.json of Qwen/Qwen3-30B-A3B): hidden 2048, 32/4 heads of 128, 128 experts of 768, 8 active
SHAPE = dict(n_embd=2048, n_heads=32, n_kv_heads=4, head_dim=128, n_expert=128, n_expert_used=8, n_ff_exp=768,
             n_vocab=151936)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default="/work/models/qwen3moe-8l-q4_k_m.gguf")
    ap.add_argument("--layers", type=int, default=8, help="layers (the real model has 48)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    write_qwen3moe(out, n_layers=a.layers, wtype="Q4_K_M", seed=a.seed, quantize_with=quantize, **SHAPE)
    with GGUFFile(out) as f:
        types = Counter(t.type for t in f.tensors.values())
        experts = sum(t.n_bytes for n, t in f.tensors.items() if "_exps." in n)
    size = out.stat().st_size
    print(f"{out}: {size / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s; tensor types {dict(types)}; "
          f"experts {experts / 1e9:.2f} GB, of which a decode step reads {SHAPE['n_expert_used'] / SHAPE['n_expert']:.1%}")

if __name__ == "__main__":
    main()
