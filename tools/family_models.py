"""Small random-weight GGUF files of the model families llama.cpp runs (issue 15): llama (optionally with
Mistral's `llama.attention.sliding_window`), qwen2, qwen3, phi3, gemma2, qwen3moe, olmoe and gpt-oss (issue 28), each with that family's real tensor
names, shapes, types and metadata keys (read from llama.cpp's src/models/<arch>.cpp and src/llama-model.cpp;
see /work/notes/families.md), written by llmbook's own `GGUFWriter`.

    from family_models import write_family_model
    write_family_model("q.gguf", "qwen2", wtype="Q4_K_M", n_embd=256, n_ff=512, qkv_bias=True, tied=False)

or from the command line (the fixture script uses this from a Python without numba):

    python tools/family_models.py OUT.gguf ARCH '{"wtype": "F16", "seed": 1}'

The same arguments always give the same bytes (numpy's PCG64 generator, llmbook's deterministic quantizers,
IQ4 blocks from the simple rounding below), so a test can rebuild the exact file a fixture was made from.

Weight types (`wtype`): every matrix in one type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), or
"Q4_K_M": llama.cpp's mix for that file type (output, or the tied token embedding, in Q6_K; attn_v and ffn_down
of the "more bits" layers in Q6_K; fused attn_qkv in Q5_K; the rest Q4_K). Norms, biases and RoPE factors are
F32 as in converted files. K-quants and IQ4_XS need rows (the input width of each matrix: n_embd, n_heads *
head_dim, n_ff) that are multiples of 256; Q8_0/Q4_0/IQ4_NL multiples of 32.

IQ4_NL / IQ4_XS matrices are made by a plain nearest-level rounding of the same Gaussian weights (not
llama.cpp's quantizer, which searches scales): valid blocks, not llama.cpp's bytes for these floats.
"""
from __future__ import annotations
import json, math, sys, zlib
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))

FAMILIES = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "qwen3moe", "olmoe", "gpt-oss")
WTYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "IQ4_NL", "IQ4_XS", "MXFP4")
# general.file_type ids (llama_ftype) for the header; for display only, llama.cpp reads each tensor's own type
FILE_TYPE_IDS = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "MXFP4": 38, "Q4_K": 15, "Q4_K_M": 15, "Q5_K": 17, "Q6_K": 18,
                 "IQ4_NL": 25, "IQ4_XS": 30, "BF16": 32}
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)
DEFAULT_NAME = "llmbook family test"   # never "phi3"/"phi-3": llama.cpp keys token attributes off general.name


# ---------------------------------------------------------------- tokenizer
def sp_vocab(n_vocab: int):
    "A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, then pieces with decreasing scores."
    n_pieces = n_vocab - 3 - 256
    if n_pieces < 1: raise ValueError(f"n_vocab must be at least 260 (3 special + 256 byte tokens + 1 piece), got {n_vocab}")
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = ["\u2581"] + list(letters) + ["\u2581" + c for c in letters]
    pieces += ["\u2581" + a + b for a in letters for b in letters] + [a + b for a in letters for b in letters]
    if n_pieces > len(pieces): pieces += [f"\u2581w{i}" for i in range(n_pieces - len(pieces))]
    pieces = pieces[:n_pieces]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(n_pieces)]
    types = [2, 3, 3] + [6] * 256 + [1] * n_pieces          # unknown, control, byte, normal
    return tokens, scores, types


# ---------------------------------------------------------------- vocabulary-only files (tokenizer and chat fixtures)
# sp_vocab plus a chat family's special tokens (CONTROL, score 0), for tools/make_chat_fixtures.py and
# tools/make_tokenizer_fixtures.py: general.name "Phi-3 ..." turns on llama.cpp's Phi-3 rule (its special tokens
# take the whitespace after them), which is why that vocabulary has <|endoftext|> (llama.cpp looks it up by text)
CHAT_VOCABS = {   # family: (general.architecture, general.name, added special tokens, BOS text, EOS text)
    "llama3": ("llama", "llmbook llama3 test vocab",
               ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
               "<|begin_of_text|>", "<|eot_id|>"),
    "phi3": ("phi3", "Phi-3 mini (llmbook test vocab)",
             ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"], "<s>", "<|endoftext|>"),
    "mistral": ("llama", "llmbook mistral test vocab", ["[INST]", "[/INST]"], "<s>", "</s>"),
}

def chat_vocab_metadata(family: str, n_vocab: int = 512) -> dict:
    "The tokenizer metadata (and general.*) of CHAT_VOCABS[family]: sp_vocab(n_vocab) then the family's special tokens."
    arch, name, specials, bos, eos = CHAT_VOCABS[family]
    tokens, scores, types = sp_vocab(n_vocab)
    tokens, scores, types = tokens + specials, scores + [0.0] * len(specials), types + [3] * len(specials)
    return {"general.architecture": arch, "general.name": name, "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": tokens.index(bos), "tokenizer.ggml.eos_token_id": tokens.index(eos),
            "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True,
            "tokenizer.ggml.add_eos_token": False}

def write_vocab(path, metadata: dict, types: dict | None = None) -> Path:
    """A GGUF with `metadata` and no tensors (llama.cpp loads it with vocab_only=True), written by llmbook's GGUFWriter.
    `types`: key -> GGUFValueType (or array spec) where inference is not enough; token ids are written UINT32,
    scores FLOAT32 and token types INT32 arrays as converted files have them."""
    from llmbook.gguf import GGUFWriter, GGUFValueType as T
    fixed = {"tokenizer.ggml.scores": (T.ARRAY, T.FLOAT32), "tokenizer.ggml.token_type": (T.ARRAY, T.INT32)}
    w = GGUFWriter(path, arch=metadata["general.architecture"])
    for k, v in metadata.items():
        if k == "general.architecture": continue
        t = (types or {}).get(k) or fixed.get(k) or (T.UINT32 if k.endswith("_token_id") else None)
        w.add(k, v, t)
    return w.write()


# ---------------------------------------------------------------- IQ4 blocks (simple rounding)
def _f16(x) -> np.ndarray: return np.asarray(x, np.float32).astype(np.float16)

def _nearest_level(x: np.ndarray) -> np.ndarray:
    "Index (0..15) of the kvalues_iq4nl level nearest to each value of x (already divided by the scale)."
    return np.abs(x[..., None] - KVALUES_IQ4NL.astype(np.float32)).argmin(-1).astype(np.uint8)

def _pack_nibbles(idx: np.ndarray) -> np.ndarray:
    "ggml's nibble order for a run of 32: byte j = idx[j] | idx[j + 16] << 4."
    idx = idx.reshape(*idx.shape[:-1], 2, 16)
    return (idx[..., 0, :] | (idx[..., 1, :] << 4)).astype(np.uint8)

def iq4_nl_blocks(w: np.ndarray) -> np.ndarray:
    "IQ4_NL bytes of float rows `w` (row length a multiple of 32): per block of 32, f16 d and 16 bytes of nibbles."
    b = w.astype(np.float32).reshape(-1, 32)
    amax = b[np.arange(len(b)), np.abs(b).argmax(-1)]             # signed value of largest magnitude
    d = _f16(amax / -127.0)                                       # like ggml: the extreme value maps to -127
    df = d.astype(np.float32)
    idx = _nearest_level(np.divide(b, df[:, None], out=np.zeros_like(b), where=df[:, None] != 0))
    out = np.zeros((len(b), 18), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = _pack_nibbles(idx)
    return out.reshape(-1)

def iq4_xs_blocks(w: np.ndarray) -> np.ndarray:
    "IQ4_XS bytes (rows a multiple of 256): f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles per 256."
    b = w.astype(np.float32).reshape(-1, 8, 32)
    n = len(b)
    sub = np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1)[..., 0] / -127.0    # ideal scale per 32
    d = _f16(np.abs(sub).max(-1) / 31.0)                                                   # (ls - 32) in -32..31
    df = d.astype(np.float32)
    ls = np.clip(np.rint(np.divide(sub, df[:, None], out=np.zeros_like(sub), where=df[:, None] != 0)), -32, 31).astype(np.int32) + 32
    dl = (df[:, None] * (ls - 32).astype(np.float32)).astype(np.float32)                 # as ggml: d * (ls - 32)
    idx = _nearest_level(np.divide(b, dl[..., None], out=np.zeros_like(b), where=dl[..., None] != 0))
    out = np.zeros((n, 136), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    h = np.zeros(n, np.uint16)
    for ib in range(8): h |= ((ls[:, ib] >> 4) & 3).astype(np.uint16) << (2 * ib)
    out[:, 2:4] = h.astype("<u2").view(np.uint8).reshape(-1, 2)
    lo = (ls & 0xF).astype(np.uint8)
    out[:, 4:8] = lo[:, 0::2] | (lo[:, 1::2] << 4)
    out[:, 8:] = _pack_nibbles(idx).reshape(n, 128)
    return out.reshape(-1)

def dequantize_iq4_nl(raw: np.ndarray) -> np.ndarray:
    "Reference dequantizer, ggml-quants.c dequantize_row_iq4_nl: y = d * kvalues[nibble], float32."
    blk = raw.reshape(-1, 18)
    d = blk[:, 0:2].copy().view(np.float16).astype(np.float32)
    q = blk[:, 2:]
    idx = np.concatenate([q & 0xF, q >> 4], -1)
    return (d * KVALUES_IQ4NL[idx].astype(np.float32)).reshape(-1)

def dequantize_iq4_xs(raw: np.ndarray) -> np.ndarray:
    "Reference dequantizer, ggml-quants.c dequantize_row_iq4_xs: dl = d * (ls - 32), y = dl * kvalues[nibble]."
    blk = raw.reshape(-1, 136)
    d = blk[:, 0:2].copy().view(np.float16).astype(np.float32)[:, 0]
    h = blk[:, 2:4].copy().view("<u2").astype(np.int32)[:, 0]
    ib = np.arange(8)
    ls = ((blk[:, 4 + ib // 2] >> (4 * (ib % 2))) & 0xF).astype(np.int32) | (((h[:, None] >> (2 * ib)) & 3) << 4)
    dl = (d[:, None] * (ls - 32).astype(np.float32)).astype(np.float32)
    q = blk[:, 8:].reshape(-1, 8, 16)
    idx = np.concatenate([q & 0xF, q >> 4], -1)
    return (dl[..., None] * KVALUES_IQ4NL[idx].astype(np.float32)).reshape(-1)


# ---------------------------------------------------------------- the Q4_K_M mix
def _use_more_bits(i: int, n: int) -> bool:
    "llama.cpp's layers that get more bits in Q4_K_M: first and last eighth, and every third between."
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2

def q4_k_m_type(name: str, n_layers: int, tied: bool) -> str:
    "The type llama.cpp's Q4_K_M gives matrix `name` (src/llama-quant.cpp llama_tensor_get_type, simplified)."
    if name == "output.weight" or (tied and name == "token_embd.weight"): return "Q6_K"
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if name.endswith("attn_v.weight") or name.endswith("ffn_down.weight") or name.endswith("ffn_down_exps.weight"):
        return "Q6_K" if _use_more_bits(layer, n_layers) else "Q4_K"
    if name.endswith("attn_qkv.weight"): return "Q5_K"
    return "Q4_K"


# ---------------------------------------------------------------- the writer
def write_family_model(path, arch: str, *,
                       wtype: str = "F16",
                       seed: int = 0,
                       n_layers: int = 2,
                       n_embd: int = 64,
                       n_heads: int = 4,
                       n_kv_heads: int = 2,
                       head_dim: int | None = None,      # None: n_embd // n_heads; else written as attention.key_length
                       n_ff: int = 128,
                       n_vocab: int = 512,
                       n_ctx_train: int = 4096,
                       rope_base: float | None = None,   # None: the family's usual (1e6 qwen, 10000 others)
                       norm_eps: float = 1e-6,
                       tied: bool | None = None,         # None: tied for qwen2/qwen3/gemma2, untied for llama/phi3
                       qkv_bias: bool | None = None,     # None: True for qwen2, False otherwise
                       output_bias: bool = False,        # qwen2 reads an optional output.bias
                       sliding_window: int | None = None,  # llama/phi3: key written (llama.cpp ignores it); gemma2: the window
                       swa_pattern: int | None = None,   # gemma2: attention.sliding_window_pattern (llama.cpp default 2)
                       attn_softcap: float | None = 50.0,   # gemma2 (None: key omitted, llama.cpp uses 50)
                       final_softcap: float | None = 30.0,  # gemma2 (None: key omitted, llama.cpp uses 30)
                       rope_dim: int | None = None,      # phi3: rope.dimension_count (partial rotary) else head_dim
                       rope_factors: bool = False,       # phi3: rope_factors_long/short tensors (LongRoPE)
                       original_context_length: int | None = None,  # phi3: rope.scaling.original_context_length
                       rope_attn_factor: float | None = None,       # phi3: rope.scaling.attn_factor (None: converter's formula if rope_factors)
                       fused_qkv: bool | None = None,    # None: True for phi3 (attn_qkv), False otherwise
                       embd_std: float | None = None,    # token_embd std (None: see SCALES below)
                       out_std: float | None = None,     # output.weight std (None: 4/sqrt(n_embd))
                       out_norm_mean: float | None = None,  # output_norm weights' mean (None: see SCALES below)
                       qk_gain: float = 1.0,             # Q and K weights' std is qk_gain/sqrt(n_embd): sharper attention
                       moe: bool = False,                # llama: Mixtral's experts (expert_count, ffn_*_exps of n_ff rows)
                       rope_yarn: list | None = None,    # [factor, original_context_length]: rope.scaling.type yarn
                       n_expert: int = 8,                # qwen3moe (and llama with moe): expert_count
                       n_expert_used: int = 2,           # qwen3moe: expert_used_count (top-k)
                       n_ff_exp: int | None = None,      # qwen3moe: expert_feed_forward_length (None: n_ff)
                       router_gain: float = 2.0,         # qwen3moe: router (ffn_gate_inp) std is router_gain/sqrt(n_embd)
                       expert_gain: float = 1.0,         # gpt-oss: gate/up experts' std is expert_gain/sqrt(n_embd) (the clamp at 7 bites)
                       name: str = DEFAULT_NAME) -> Path:
    "Write a small random `arch` GGUF at `path` as llama.cpp's converter lays that family out; returns the path."
    from llmbook.gguf import GGUFWriter, GGUFValueType
    from llmbook.quantize import quantize
    from llmbook.tensors import QTensor, GGMLType
    if arch not in FAMILIES: raise ValueError(f"arch must be one of {FAMILIES}, not {arch!r}")
    wtype = wtype.upper()
    if wtype not in WTYPES: raise ValueError(f"wtype must be one of {WTYPES}, not {wtype!r}")
    if "phi3" in name.lower() or "phi-3" in name.lower():
        raise ValueError("general.name must not contain 'phi3'/'phi-3': llama.cpp would then look up <|endoftext|>")
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    # one random stream per tensor, from (seed, name): switching an option on or off adds or drops tensors
    # and leaves every other tensor's values as they were
    rng_for = lambda tname: np.random.default_rng([seed, zlib.crc32(tname.encode())])

    hd = head_dim or n_embd // n_heads
    q_dim, kv_dim = n_heads * hd, n_kv_heads * hd
    if n_heads % n_kv_heads: raise ValueError("n_heads must be a multiple of n_kv_heads")
    if arch in ("qwen2", "phi3") and q_dim != n_embd:
        raise ValueError(f"{arch}: llama.cpp shapes attn_q/attn_output as n_embd x n_embd, so n_heads * head_dim must be n_embd")
    tied = (arch in ("qwen2", "qwen3", "gemma2")) if tied is None else tied
    if arch == "gemma2" and not tied: raise ValueError("gemma2: llama.cpp always ties the output to token_embd (no output.weight)")
    qkv_bias = (arch in ("qwen2", "gpt-oss")) if qkv_bias is None else qkv_bias
    fused_qkv = (arch == "phi3") if fused_qkv is None else fused_qkv
    n_rot = rope_dim or hd
    if arch != "phi3" and n_rot != hd: raise ValueError("rope_dim is a phi3 option (llama.cpp asserts n_rot == head_dim elsewhere)")
    if rope_factors and arch != "phi3": raise ValueError("rope_factors (LongRoPE) is a phi3 option here")
    if sliding_window is not None and arch in ("qwen2", "qwen3"):
        raise ValueError(f"{arch}: llama.cpp reads no sliding window for this arch")
    if rope_base is None: rope_base = 1e6 if arch in ("qwen2", "qwen3", "qwen3moe") else 10000.0
    if moe and arch != "llama": raise ValueError("moe=True is the llama (Mixtral) option; qwen3moe always has experts")
    experts = arch in ("qwen3moe", "olmoe", "gpt-oss") or moe
    if arch == "olmoe" and not q_dim == kv_dim == n_embd:   # llama.cpp: attn_q_norm and attn_k_norm are n_embd long
        raise ValueError("olmoe: n_heads * head_dim and n_kv_heads * head_dim must both be n_embd")
    if experts and not 0 < n_expert_used <= n_expert: raise ValueError("need 0 < n_expert_used <= n_expert")
    n_ff_exp = n_ff if moe or arch == "olmoe" else (n_ff_exp or n_ff)   # Mixtral, OLMoE: an expert is feed_forward_length wide
    # SCALES. Logits of std ~4, so that top-2 margins are mostly well above llama.cpp's rounding noise. Untied:
    # an embedding of std 1 leads the residual stream, the output matrix sets the logit scale. Tied: a large
    # embedding makes every position predict its own input token (logit |e_t|^2), so the embedding is small
    # (gemma2 multiplies it by sqrt(n_embd): 0.25 per element after that) and output_norm's weights set the scale.
    if embd_std is None: embd_std = 0.25 * n_embd**-0.5 if arch == "gemma2" else n_embd**-0.5 if tied else 1.0
    if out_norm_mean is None: out_norm_mean = 16.0 if arch == "gemma2" else 4.0 if tied else 1.0
    if out_std is None: out_std = 4 * n_embd**-0.5

    w = GGUFWriter(path, arch=arch)
    w.add("general.name", name)
    w.add("general.file_type", FILE_TYPE_IDS[wtype], u32)
    w.add("general.quantization_version", 2, u32)
    a = lambda k, v, t=u32: w.add(f"{arch}.{k}", v, t)
    a("context_length", n_ctx_train); a("embedding_length", n_embd); a("block_count", n_layers)
    a("feed_forward_length", n_ff); a("attention.head_count", n_heads); a("attention.head_count_kv", n_kv_heads)
    a("rope.freq_base", float(rope_base), f32)
    if rope_yarn:   # as convert_hf_to_gguf writes a rope_scaling {"type": "yarn"} of config.json
        if arch in ("phi3", "gemma2"): raise ValueError(f"{arch}: rope_yarn is not an option here")
        w.add(f"{arch}.rope.scaling.type", "yarn"); a("rope.scaling.factor", float(rope_yarn[0]), f32)
        a("rope.scaling.original_context_length", int(rope_yarn[1]))
    a("attention.layer_norm_rms_epsilon", float(norm_eps), f32)
    if arch == "llama":
        a("vocab_size", n_vocab); a("rope.dimension_count", hd)
        if hd != n_embd // n_heads: a("attention.key_length", hd); a("attention.value_length", hd)
        if sliding_window is not None: a("attention.sliding_window", sliding_window)
        if moe: a("expert_count", n_expert); a("expert_used_count", n_expert_used)
    elif arch in ("qwen3", "qwen3moe"):
        a("attention.key_length", hd); a("attention.value_length", hd)
        if arch == "qwen3moe":   # convert_hf_to_gguf's Qwen3MoeModel: the dense n_ff stays in feed_forward_length
            a("expert_count", n_expert); a("expert_used_count", n_expert_used); a("expert_feed_forward_length", n_ff_exp)
    elif arch == "gpt-oss":    # convert_hf_to_gguf's GptOssModel
        a("attention.key_length", hd); a("attention.value_length", hd)
        a("expert_count", n_expert); a("expert_used_count", n_expert_used); a("expert_feed_forward_length", n_ff_exp)
        a("attention.sliding_window", 128 if sliding_window is None else sliding_window)
    elif arch == "olmoe":      # convert_hf_to_gguf's OlmoeModel: feed_forward_length is the expert size
        a("expert_count", n_expert); a("expert_used_count", n_expert_used)
    elif arch == "phi3":
        a("rope.dimension_count", n_rot)
        a("rope.scaling.original_context_length", original_context_length or n_ctx_train)
        a("attention.sliding_window", 0 if sliding_window is None else sliding_window)
        if rope_factors:
            orig = original_context_length or n_ctx_train
            scale = n_ctx_train / orig
            if rope_attn_factor is None:   # convert_hf_to_gguf (conversion/phi.py) for rope_type longrope
                rope_attn_factor = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
        if rope_attn_factor is not None: a("rope.scaling.attn_factor", float(rope_attn_factor), f32)
    elif arch == "gemma2":
        a("attention.key_length", hd); a("attention.value_length", hd)
        if attn_softcap is not None: a("attn_logit_softcapping", float(attn_softcap), f32)
        if final_softcap is not None: a("final_logit_softcapping", float(final_softcap), f32)
        if sliding_window is not None: a("attention.sliding_window", sliding_window)
        if swa_pattern is not None: a("attention.sliding_window_pattern", swa_pattern)

    tokens, scores, types = sp_vocab(n_vocab)
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", tokens)
    w.add("tokenizer.ggml.scores", scores, (GGUFValueType.ARRAY, f32))
    w.add("tokenizer.ggml.token_type", types, (GGUFValueType.ARRAY, GGUFValueType.INT32))
    for k, v in (("bos", 1), ("eos", 2), ("unknown", 0)): w.add(f"tokenizer.ggml.{k}_token_id", v, u32)
    w.add("tokenizer.ggml.add_bos_token", True); w.add("tokenizer.ggml.add_eos_token", False)

    def mat(tname, rows, cols, std, shape=None):
        x = (rng_for(tname).standard_normal((rows, cols)) * std).astype(np.float32)
        if shape is not None: x = x.reshape(shape)      # 3-D expert tensors: (n_expert, rows, cols)
        t = q4_k_m_type(tname, n_layers, tied) if wtype == "Q4_K_M" else wtype
        if wtype == "MXFP4": t = "MXFP4" if "_exps." in tname else "Q8_0"   # gpt-oss's files: experts MXFP4
        if t == "IQ4_NL": q = QTensor(iq4_nl_blocks(x), GGMLType.IQ4_NL, x.shape)
        elif t == "IQ4_XS":
            if cols % 256: raise ValueError(f"{tname}: rows of {cols} are not whole IQ4_XS blocks of 256")
            q = QTensor(iq4_xs_blocks(x), GGMLType.IQ4_XS, x.shape)
        elif t == "F32": q = x
        elif t == "F16": q = x.astype(np.float16)
        elif t == "MXFP4":
            from llmbook.moe import quantize_mxfp4
            q = quantize_mxfp4(x)
        else: q = quantize(x, t)
        w.add_tensor(tname, q)
    def vec(tname, n, mean=1.0, std=0.1):
        w.add_tensor(tname, (mean + std * rng_for(tname).standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", n_vocab, n_embd, embd_std)
    vec("output_norm.weight", n_embd, out_norm_mean, 0.1 * out_norm_mean)
    if not tied: mat("output.weight", n_vocab, n_embd, out_std)
    if output_bias:
        # phi3's graph would add model.output_b, but load_arch_tensors never creates it: only qwen2 loads one
        if arch != "qwen2": raise ValueError(f"{arch}: llama.cpp loads no output.bias")
        vec("output.bias", n_vocab, 0.0, 0.1)
    if rope_factors:
        # LongRoPE factors divide each pair's frequency: short ones near 1, long ones growing to ~16 like Phi-3.5's
        short, long = "rope_factors_short.weight", "rope_factors_long.weight"
        w.add_tensor(short, (1.0 + 0.1 * rng_for(short).random(n_rot // 2)).astype(np.float32))
        w.add_tensor(long, np.sort(np.exp(rng_for(long).uniform(0.0, math.log(16.0), n_rot // 2))).astype(np.float32))
    for i in range(n_layers):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", n_embd)
        if fused_qkv:
            mat(p + "attn_qkv.weight", q_dim + 2 * kv_dim, n_embd,
                np.repeat([qk_gain, qk_gain, 1.0], [q_dim, kv_dim, kv_dim])[:, None] * n_embd**-0.5)
        else:
            mat(p + "attn_q.weight", q_dim, n_embd, qk_gain * n_embd**-0.5)
            mat(p + "attn_k.weight", kv_dim, n_embd, qk_gain * n_embd**-0.5)
            mat(p + "attn_v.weight", kv_dim, n_embd, n_embd**-0.5)
        if qkv_bias:
            if fused_qkv: vec(p + "attn_qkv.bias", q_dim + 2 * kv_dim, 0.0, 0.1)
            else:
                vec(p + "attn_q.bias", q_dim, 0.0, 0.1); vec(p + "attn_k.bias", kv_dim, 0.0, 0.1)
                vec(p + "attn_v.bias", kv_dim, 0.0, 0.1)
        if arch in ("qwen3", "qwen3moe"):
            vec(p + "attn_q_norm.weight", hd); vec(p + "attn_k_norm.weight", hd)
        if arch == "olmoe":     # one RMSNorm over all of q and one over all of k, before the split into heads
            vec(p + "attn_q_norm.weight", q_dim); vec(p + "attn_k_norm.weight", kv_dim)
        mat(p + "attn_output.weight", n_embd, q_dim, q_dim**-0.5)
        if arch == "gemma2": vec(p + "post_attention_norm.weight", n_embd)
        if arch == "gpt-oss":   # output bias, one sink logit per head, and the FFN's norm under gemma's name
            vec(p + "attn_output.bias", n_embd, 0.0, 0.1); vec(p + "attn_sinks.weight", n_heads, 0.0, 1.0)
            vec(p + "post_attention_norm.weight", n_embd)
        else: vec(p + "ffn_norm.weight", n_embd)
        if arch == "phi3": mat(p + "ffn_up.weight", 2 * n_ff, n_embd, n_embd**-0.5)   # [gate; up], gate first
        elif experts:
            # the router stays F32 (llama.cpp's quantizer never quantizes ffn_gate_inp); experts are 3-D tensors,
            # GGUF dims {n_embd, n_ff_exp, n_expert}: numpy shape (n_expert, n_ff_exp, n_embd), one expert a row slice
            router = p + "ffn_gate_inp.weight"
            w.add_tensor(router, (rng_for(router).standard_normal((n_expert, n_embd)) * router_gain * n_embd**-0.5).astype(np.float32))
            g = expert_gain * n_embd**-0.5 if arch == "gpt-oss" else n_embd**-0.5
            mat(p + "ffn_gate_exps.weight", n_expert * n_ff_exp, n_embd, g, (n_expert, n_ff_exp, n_embd))
            mat(p + "ffn_up_exps.weight", n_expert * n_ff_exp, n_embd, g, (n_expert, n_ff_exp, n_embd))
            mat(p + "ffn_down_exps.weight", n_expert * n_embd, n_ff_exp, n_ff_exp**-0.5, (n_expert, n_embd, n_ff_exp))
            if arch == "gpt-oss":   # biases on the router and on every expert's three matrices (F32, 2-D for experts)
                vec(router[:-6] + "bias", n_expert, 0.0, 0.5)
                for x, n in (("gate", n_ff_exp), ("up", n_ff_exp), ("down", n_embd)):
                    t = p + f"ffn_{x}_exps.bias"
                    w.add_tensor(t, (0.5 * rng_for(t).standard_normal((n_expert, n))).astype(np.float32))
            continue
        else:
            mat(p + "ffn_gate.weight", n_ff, n_embd, n_embd**-0.5)
            mat(p + "ffn_up.weight", n_ff, n_embd, n_embd**-0.5)
        mat(p + "ffn_down.weight", n_embd, n_ff, n_ff**-0.5)
        if arch == "gemma2": vec(p + "post_ffw_norm.weight", n_embd)
    return w.write()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3): raise SystemExit("usage: family_models.py OUT.gguf ARCH ['{json kwargs}']")
    kwargs = json.loads(argv[2]) if len(argv) == 3 else {}
    print(write_family_model(argv[0], argv[1], **kwargs))


if __name__ == "__main__":
    main()
