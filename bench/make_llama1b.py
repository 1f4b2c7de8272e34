"""Write a random-weight GGUF shaped like Llama-3.2-1B, quantized to Q4_K_M, for speed benchmarks.

Why: SmolLM2-135M is too small to show where time goes in a real-sized model, and a real 1B download is
not available here. Speed depends only on the shapes and the tensor types, so random weights with
Llama-3.2-1B's shapes and llama.cpp's Q4_K_M type mix benchmark like the real thing (the text is gibberish).
The file is ~0.8 GB and is never committed.

    .venv/bin/python bench/make_llama1b.py [OUT.gguf] [--keep-f16 F16.gguf]   # default /work/models/llama1b-q4_k_m.gguf

It writes an F16 model to a temporary file next to OUT (~2.5 GB, one tensor in memory at a time), then
quantizes it with llmbook's own `quantize_model(..., "Q4_K_M")` (llama.cpp's rules), then deletes the
temporary. About 4 minutes on 2 cores, most of it in the numpy quantizer.
"""
import argparse, math, time
from collections import Counter
from pathlib import Path
import numpy as np
from llmbook.gguf import GGUFFile, GGUFWriter, GGUFValueType
from llmbook.tensors import GGMLType, QTensor
from llmbook.quantize import LazyQTensor, quantize_model
from llmbook.model import default_model_path

# Llama-3.2-1B's shape (config.json of meta-llama/Llama-3.2-1B)
N_LAYERS, N_EMBD, N_HEADS, N_KV_HEADS, N_FF, N_VOCAB = 16, 2048, 32, 8, 8192, 128256
HEAD_DIM = N_EMBD // N_HEADS
ROPE_BASE, NORM_EPS, N_CTX_TRAIN = 500000.0, 1e-5, 131072
# llama3 RoPE scaling: real Llama 3.x GGUFs carry it as a `rope_freqs.weight` tensor (no metadata key),
# which llmbook and llama.cpp both read; these are Llama-3.2's rope_scaling parameters.
ROPE_FACTOR, LOW_FREQ_FACTOR, HIGH_FREQ_FACTOR, ORIG_CTX = 32.0, 1.0, 4.0, 8192


def llama3_rope_factors() -> np.ndarray:
    "The per-pair divisors of the RoPE frequencies, as convert_hf_to_gguf.py computes them for llama3 scaling."
    out = []
    for i in range(0, HEAD_DIM, 2):
        wavelen = 2 * math.pi * ROPE_BASE ** (i / HEAD_DIM)
        if wavelen < ORIG_CTX / HIGH_FREQ_FACTOR: out.append(1.0)
        elif wavelen > ORIG_CTX / LOW_FREQ_FACTOR: out.append(ROPE_FACTOR)
        else:
            smooth = (ORIG_CTX / wavelen - LOW_FREQ_FACTOR) / (HIGH_FREQ_FACTOR - LOW_FREQ_FACTOR)
            out.append(1 / ((1 - smooth) / ROPE_FACTOR + smooth))
    return np.array(out, dtype=np.float32)


def add_tokenizer(w: GGUFWriter):
    "SmolLM2's BPE tokenizer, padded with reserved control tokens to Llama 3's 128256 ids (= embedding rows)."
    with GGUFFile(default_model_path()) as f:
        md, types = dict(f.metadata), dict(f.metadata_types)
    keys = [k for k in md if k.startswith("tokenizer.ggml.") or k == "tokenizer.chat_template"]
    n = len(md["tokenizer.ggml.tokens"])
    # type 3 = CONTROL, as Llama 3's own <|reserved_special_token_N|> are: never produced from plain text
    # (so the tokenizers do not scan text for 79k extra strings) and not printed when decoded.
    pad = {"tokenizer.ggml.tokens": [f"<|reserved_special_token_{i}|>" for i in range(N_VOCAB - n)],
           "tokenizer.ggml.token_type": [3] * (N_VOCAB - n),
           "tokenizer.ggml.scores": [0.0] * (N_VOCAB - n)}
    for k in keys:
        w.add(k, list(md[k]) + pad[k] if k in pad else md[k], types[k])


def write_f16(path: Path, seed: int) -> Path:
    "The random model in F16 (norms and rope factors in F32); tensors are made one at a time while writing."
    rng = np.random.default_rng(seed)
    w = GGUFWriter(path, arch="llama")
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    w.add("general.name", "llama-3.2-1b-shaped-random")
    for key, v in (("block_count", N_LAYERS), ("context_length", N_CTX_TRAIN), ("embedding_length", N_EMBD),
                   ("feed_forward_length", N_FF), ("attention.head_count", N_HEADS),
                   ("attention.head_count_kv", N_KV_HEADS), ("attention.key_length", HEAD_DIM),
                   ("attention.value_length", HEAD_DIM), ("rope.dimension_count", HEAD_DIM), ("vocab_size", N_VOCAB)):
        w.add(f"llama.{key}", v, u32)
    w.add("llama.rope.freq_base", ROPE_BASE, f32)
    w.add("llama.attention.layer_norm_rms_epsilon", NORM_EPS, f32)
    add_tokenizer(w)

    # Scales as in llmbook.testmodels.write_random_model: unit-variance embeddings, projections of std
    # fan_in**-0.5 so each layer keeps the activations' size, norm weights near 1.
    def mat(name, rows, cols, scale):
        def make():
            a = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(scale)
            return QTensor(a.astype(np.float16), GGMLType.F16, (rows, cols))
        w.add_tensor(name, LazyQTensor(make, GGMLType.F16, (rows, cols)))
    def vec(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", N_VOCAB, N_EMBD, 1.0)       # tied: also the output matrix (no output.weight)
    vec("output_norm.weight", N_EMBD)
    w.add_tensor("rope_freqs.weight", llama3_rope_factors())
    q_dim, kv_dim = N_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM
    for i in range(N_LAYERS):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", N_EMBD); vec(p + "ffn_norm.weight", N_EMBD)
        mat(p + "attn_q.weight", q_dim, N_EMBD, N_EMBD**-0.5); mat(p + "attn_k.weight", kv_dim, N_EMBD, N_EMBD**-0.5)
        mat(p + "attn_v.weight", kv_dim, N_EMBD, N_EMBD**-0.5); mat(p + "attn_output.weight", N_EMBD, q_dim, q_dim**-0.5)
        mat(p + "ffn_gate.weight", N_FF, N_EMBD, N_EMBD**-0.5); mat(p + "ffn_up.weight", N_FF, N_EMBD, N_EMBD**-0.5)
        mat(p + "ffn_down.weight", N_EMBD, N_FF, N_FF**-0.5)
    return w.write()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="/work/models/llama1b-q4_k_m.gguf", help="output GGUF path")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the weights (default 0)")
    ap.add_argument("--keep-f16", metavar="PATH", help="keep the F16 model as PATH too (the float-weights benchmark)")
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".f16-tmp.gguf")      # same disk as the output: ~2.5 GB, deleted at the end
    t0 = time.perf_counter()
    try:
        print(f"writing random F16 model to {tmp} ...", flush=True)
        write_f16(tmp, args.seed)
        print(f"  {tmp.stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - t0:.0f} s; quantizing to Q4_K_M", flush=True)
        res = quantize_model(tmp, out, "Q4_K_M")
        if args.keep_f16: tmp.replace(args.keep_f16)
    finally:
        tmp.unlink(missing_ok=True)
    print(res.summary())
    with GGUFFile(out) as f:
        types = Counter(t.type for t in f.tensors.values())
    print(f"{out}: {out.stat().st_size / 2**20:.0f} MiB, tensor types {dict(types.most_common())}, "
          f"{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
