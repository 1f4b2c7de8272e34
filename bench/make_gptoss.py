"""Write a random-weight GGUF shaped like gpt-oss-20b, 8 layers instead of 24, with MXFP4 experts, for speed
benchmarks of gpt-oss (issue 28; nbs/3_19_moe.ipynb).

Why: gpt-oss-20b is the mixture of experts with MXFP4 weights that CPU users run; its speed depends on its per-layer
shapes and tensor types, not on the weights' values. Each layer here is the real one (config.json of openai/gpt-oss-20b):
n_embd 2880, 64 query and 8 KV heads of 64 with biases and a sink each, 32 experts of 2880 with biases, 4 used per
token, the router in F32, windows of 128 on even layers, YaRN (factor 32 over 4096, base 150000). Types as in the
GGUF llama.cpp's converter makes from the MXFP4 checkpoint: experts MXFP4, the attention, embedding and output
matrices Q8_0 (its n_embd 2880 is not a multiple of 256: no K-quants). The tokenizer is SmolLM2's (byte-level BPE,
chat template) padded with reserved control tokens to gpt-oss's 201088 ids, so that the embedding and the output
head have the real size. The text it makes is gibberish: speed only. 4.9 GB, never committed.

    .venv/bin/python bench/make_gptoss.py [OUT.gguf] [--layers 8] [--vocab N] [--attn-type F16]   # default /work/models/gptoss-8l-mxfp4.gguf

The tensors are held in memory until the file is written (about its size); each expert, and each slab of 16384 rows
of the embedding and output, is drawn and quantized alone. Checked at a small size (2 layers, 4 experts): llama.cpp
loads it and llmbook's logits agree with its (cosine >= 0.9999).
"""
import argparse, time
from collections import Counter
from pathlib import Path
import numpy as np
from llmbook.gguf import GGUFFile, GGUFWriter, GGUFValueType
from llmbook.tensors import QTensor, GGMLType
from llmbook.model import default_model_path
from llmbook.quants import quantize
from llmbook.moe import _copy_tokenizer, quantize_mxfp4

SHAPE = dict(n_embd=2880, n_heads=64, n_kv_heads=8, head_dim=64, n_expert=32, n_expert_used=4, n_ff_exp=2880, n_vocab=201088)

def write_gptoss(path, n_layers=8, seed=0, n_embd=2880, n_heads=64, n_kv_heads=8, head_dim=64, n_expert=32,
                 n_expert_used=4, n_ff_exp=2880, n_vocab=201088, attn_type="Q8_0") -> Path:
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    w = GGUFWriter(path, arch="gpt-oss")
    w.add("general.name", "llmbook random gpt-oss")
    a = lambda k, v, t=u32: w.add(f"gpt-oss.{k}", v, t)
    a("context_length", 131072); a("embedding_length", n_embd); a("block_count", n_layers)
    a("feed_forward_length", n_ff_exp); a("attention.head_count", n_heads); a("attention.head_count_kv", n_kv_heads)
    a("attention.key_length", head_dim); a("attention.value_length", head_dim)
    a("rope.freq_base", 150000.0, f32); a("attention.layer_norm_rms_epsilon", 1e-5, f32)
    a("expert_count", n_expert); a("expert_used_count", n_expert_used); a("expert_feed_forward_length", n_ff_exp)
    a("attention.sliding_window", 128)
    w.add("gpt-oss.rope.scaling.type", "yarn"); a("rope.scaling.factor", 32.0, f32); a("rope.scaling.original_context_length", 4096)
    n_vocab = _copy_tokenizer(w, default_model_path(), n_vocab)
    rng = np.random.default_rng(seed)
    def q8(name, shape, std):               # Q8_0, 16384 rows at a time (the embedding alone is 579 M weights)
        slabs = [quantize(rng.standard_normal((min(16384, shape[0] - r), shape[1]), np.float32) * np.float32(std), "Q8_0").data
                 for r in range(0, shape[0], 16384)]
        w.add_tensor(name, QTensor(np.concatenate(slabs), GGMLType.Q8_0, shape))
    def attn(name, shape, std):             # the attention's matrices: Q8_0, or F16 as ggml-org's gpt-oss GGUFs keep them
        if attn_type == "Q8_0": return q8(name, shape, std)
        w.add_tensor(name, QTensor.from_array((rng.standard_normal(shape, np.float32) * np.float32(std)).astype(np.float16)))
    vec = lambda name, n, mean=1.0, std=0.1: w.add_tensor(name, (mean + std * rng.standard_normal(n)).astype(np.float32))
    def mxfp4(name, rows, cols, std):       # one expert at a time: a (n_expert, rows, cols) tensor of MXFP4 blocks
        slabs = [quantize_mxfp4((rng.standard_normal((rows, cols), np.float32) * std)).data for _ in range(n_expert)]
        w.add_tensor(name, QTensor(np.concatenate(slabs), GGMLType.MXFP4, (n_expert, rows, cols)))
    q_dim, kv_dim, s = n_heads * head_dim, n_kv_heads * head_dim, n_embd**-0.5
    q8("token_embd.weight", (n_vocab, n_embd), 1.0)
    vec("output_norm.weight", n_embd)
    q8("output.weight", (n_vocab, n_embd), 4 * s)
    for i in range(n_layers):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", n_embd); vec(p + "post_attention_norm.weight", n_embd)
        attn(p + "attn_q.weight", (q_dim, n_embd), s); attn(p + "attn_k.weight", (kv_dim, n_embd), s)
        attn(p + "attn_v.weight", (kv_dim, n_embd), s); attn(p + "attn_output.weight", (n_embd, q_dim), q_dim**-0.5)
        for x, n in (("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim), ("attn_output", n_embd)): vec(p + x + ".bias", n, 0.0)
        vec(p + "attn_sinks.weight", n_heads, 0.0, 1.0)
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((n_expert, n_embd), np.float32) * 2 * s))
        vec(p + "ffn_gate_inp.bias", n_expert, 0.0, 0.5)
        mxfp4(p + "ffn_gate_exps.weight", n_ff_exp, n_embd, s); mxfp4(p + "ffn_up_exps.weight", n_ff_exp, n_embd, s)
        mxfp4(p + "ffn_down_exps.weight", n_embd, n_ff_exp, n_ff_exp**-0.5)
        for x, n in (("gate", n_ff_exp), ("up", n_ff_exp), ("down", n_embd)):
            w.add_tensor(p + f"ffn_{x}_exps.bias", (0.1 * rng.standard_normal((n_expert, n), np.float32)))
    return w.write()

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default="/work/models/gptoss-8l-mxfp4.gguf")
    ap.add_argument("--layers", type=int, default=8, help="layers (the real model has 24)")
    ap.add_argument("--experts", type=int, default=32, help="experts per layer (the real model has 32; fewer for a quick check)")
    ap.add_argument("--vocab", type=int, default=201088, help="ids in the padded vocabulary (the real model has 201088)")
    ap.add_argument("--attn-type", choices=("Q8_0", "F16"), default="Q8_0",
                    help="the attention matrices' type (ggml-org's gpt-oss GGUFs keep them in F16)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    write_gptoss(out, n_layers=a.layers, seed=a.seed, **{**SHAPE, "n_expert": a.experts, "n_vocab": a.vocab}, attn_type=a.attn_type)
    with GGUFFile(out) as f:
        types = Counter(t.type for t in f.tensors.values())
        experts = sum(t.n_bytes for n, t in f.tensors.items() if "_exps.weight" in n)
    print(f"{out}: {out.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s; tensor types {dict(types)}; "
          f"experts {experts / 1e9:.2f} GB, of which a decode step reads {SHAPE['n_expert_used'] / a.experts:.1%}")

if __name__ == "__main__":
    main()
