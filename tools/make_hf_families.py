"""Make tests/fixtures/hf/<family>/: a tiny random Hugging Face checkpoint of each of the six families issue 41 added
to llmbook.hf (phi3, gemma2, mixtral, qwen3moe, olmoe, gptoss, and gpt-oss's MXFP4 release layout, gptoss_mxfp4),
saved by transformers itself (BF16 safetensors, config.json, tokenizer.json built with the `tokenizers` library,
tokenizer_config.json with special tokens and a chat template), plus the references tests/test_hf_families.py
compares llmbook with:

- logits.npz: the prompts' token ids, transformers' float32 logits on the saved BF16 checkpoint, and llama.cpp's
  logits on the GGUF file `llmbook.hf.convert` writes from it (F16);
- expected.json: the `tokenizers` library's ids of the tokenizer-parity strings (tests/test_hf.py's STRINGS), the
  seed, and each MoE layer's smallest router margin (the seeds are chosen so that no token's k-th and (k+1)-th
  expert are near a tie: a rounding difference then cannot change which experts run).

Three Pythons: this one (the project's, with llmbook), HFPY (transformers, torch, tokenizers) and REFPY
(llama-cpp-python):

    HFPY=/tmp/hfvenv/bin/python REFPY=/tmp/refvenv/bin/python .venv/bin/python tools/make_hf_families.py [family ...]

transformers and torch are needed here only, never by the tests or the package.
"""
import json, os, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "tests" / "fixtures" / "hf"
FAMILIES = ("phi3", "gemma2", "mixtral", "qwen3moe", "olmoe", "gptoss", "gptoss_mxfp4")
PROMPTS = ["The quick brown fox jumps over the lazy dog.", "def add(a, b):\n    return a + b"]
CHKTXT_NOTE = "the last string is llama.cpp's pre-tokenizer check text (_CHKTXT)"

# ---------------------------------------------------------------- the transformers side (runs in HFPY)
HF_SIDE = r'''
import json, math, sys
from pathlib import Path
import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers, Regex
from transformers import AutoConfig, AutoModelForCausalLM

family, out, seed, strings, prompts, corpus = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), *map(json.loads, sys.argv[4:7])
out.mkdir(parents=True, exist_ok=True)
QWEN2_RX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_RX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

def spm_style(specials_front, specials_back, prepend):
    "A SentencePiece-style BPE tokenizer.json (byte_fallback), merges for every split in score order, as HF converts one."
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = ["\u2581"] + list(letters) + list(letters.upper()) + list("0123456789.,:()#+=_'\"!?-") + ["\u2581" + c for c in letters]
    pieces += ["\u2581" + c for c in letters.upper()]
    pieces += ["\u2581" + a + b for a in "tahs" for b in "heoa"] + [a + b for a in "thaeoi" for b in "hearn"]
    pieces += ["\u2581the", "\u2581and", "ing", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "\u2581qu", "ick", "\u2581def", "\u2581return"]
    pieces = list(dict.fromkeys(pieces))
    tokens = specials_front + [f"<0x{b:02X}>" for b in range(256)] + pieces
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for t in pieces:
        for k in range(1, len(t)):
            a, b = t[:k], t[k:]
            if a in vocab and b in vocab: merges.append((vocab[t], vocab[a], vocab[b], a, b))
    merges = [(a, b) for _, _, _, a, b in sorted(merges)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    norms = ([normalizers.Prepend("\u2581")] if prepend else []) + [normalizers.Replace(" ", "\u2581")]
    tok.normalizer = normalizers.Sequence(norms) if len(norms) > 1 else norms[0]
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(" ", 1, 0)] if prepend else []))
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials_front if t != "<unk>"])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False, rstrip=False) for t in specials_back])
    return tok

def byte_level(rx, specials, vocab_size=320):
    "A byte-level BPE trained on a small corpus with the family's pre-tokenizer."
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True) if rx is None else
                         pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    return tok

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
fam = family.replace("_mxfp4", "")
if fam in ("phi3", "mixtral"):
    back = ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"] if fam == "phi3" else []
    tok = spm_style(["<unk>", "<s>", "</s>"], back, prepend=True)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tc = {"bos_token": "<s>", "eos_token": "<|endoftext|>" if fam == "phi3" else "</s>", "unk_token": "<unk>",
          "add_bos_token": True, "add_eos_token": False,
          "chat_template": ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}<|assistant|>\n"
                            if fam == "phi3" else "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")}
    ids = dict(bos_token_id=bos, eos_token_id=tok.token_to_id(tc["eos_token"]), pad_token_id=None)
elif fam == "gemma2":
    tok = spm_style(["<pad>", "<eos>", "<bos>", "<unk>"], ["<start_of_turn>", "<end_of_turn>"], prepend=False)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", 2)])
    tc = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": True,
          "add_eos_token": False, "chat_template": "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
          "{{ m['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n"}
    ids = dict(bos_token_id=2, eos_token_id=1, pad_token_id=0)
elif fam == "qwen3moe":
    tok = byte_level(QWEN2_RX, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tc = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "add_bos_token": False, "chat_template": CHATML}
    ids = dict(bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"), pad_token_id=tok.token_to_id("<|endoftext|>"))
elif fam == "olmoe":
    tok = byte_level(None, ["<|endoftext|>", "<|padding|>"])
    tc = {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "pad_token": "<|padding|>", "add_bos_token": False,
          "chat_template": "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"}
    ids = dict(bos_token_id=None, eos_token_id=tok.token_to_id("<|endoftext|>"), pad_token_id=tok.token_to_id("<|padding|>"))
else:   # gpt-oss: o200k
    tok = byte_level(O200K_RX, ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|start|>", "<|end|>", "<|message|>",
                                "<|channel|>", "<|call|>"])
    tc = {"eos_token": "<|return|>", "pad_token": "<|endoftext|>", "bos_token": "<|startoftext|>", "add_bos_token": False,
          "chat_template": "{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>{% endfor %}"
          "<|start|>assistant"}
    ids = dict(bos_token_id=tok.token_to_id("<|startoftext|>"), eos_token_id=tok.token_to_id("<|return|>"),
               pad_token_id=tok.token_to_id("<|endoftext|>"))
tok.save(str(out / "tokenizer.json"))
tc = {k: v for k, v in tc.items() if v is not None}
tc.update(tokenizer_class="PreTrainedTokenizerFast", model_max_length=4096, clean_up_tokenization_spaces=False)
(out / "tokenizer_config.json").write_text(json.dumps(tc, indent=2))
n_vocab = tok.get_vocab_size()

common = dict(vocab_size=n_vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False, **ids)
kw = {"phi3": ("phi3", dict(common, original_max_position_embeddings=4096)),
      "gemma2": ("gemma2", dict(common, head_dim=8, query_pre_attn_scalar=8, sliding_window=4, tie_word_embeddings=True)),
      "mixtral": ("mixtral", dict(common, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
      "qwen3moe": ("qwen3_moe", dict(common, head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                      norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])),
      "olmoe": ("olmoe", dict(common, intermediate_size=32, num_key_value_heads=4, num_experts=4, num_experts_per_tok=2)),
      "gptoss": ("gpt_oss", dict(common, intermediate_size=32, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
                                 sliding_window=4, max_position_embeddings=131072))}[fam]
config = AutoConfig.for_model(kw[0], **kw[1])
torch.manual_seed(seed)
model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
g = torch.Generator().manual_seed(seed)
with torch.no_grad():          # weights at the scales of a trained model: logits of std ~3, not transformers' 0.02 init
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"): p.copy_((0.0 if fam == "gemma2" else 1.0) + 0.1 * torch.randn(p.shape, generator=g))
        elif name.endswith("sinks"): p.copy_(torch.randn(p.shape, generator=g))
        elif "bias" in name: p.copy_(0.1 * torch.randn(p.shape, generator=g))
        elif "embed_tokens" in name: p.copy_(torch.randn(p.shape, generator=g) * (0.5 if fam == "gemma2" else 1.0) / (32 ** 0.5 if fam == "gemma2" else 1.0))
        elif name == "lm_head.weight": p.copy_(torch.randn(p.shape, generator=g) * 3 / p.shape[1] ** 0.5)
        elif "experts.gate_up_proj" in name or "experts.down_proj" in name:     # gpt-oss: (n_expert, in, out)
            p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
        elif "router" in name or name.endswith("gate.weight"): p.copy_(torch.randn(p.shape, generator=g) * 2 / p.shape[1] ** 0.5)
        else: p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
model = model.to(torch.bfloat16)
model.save_pretrained(out)
cfg = json.loads((out / "config.json").read_text())
cfg.pop("transformers_version", None)
(out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
model.eval()
res = {"tokenizer_ids": [tok.encode(s, add_special_tokens=False).ids for s in strings], "prompts": [], "router_margin": None}
margins = []
with torch.no_grad():
    for p in prompts:
        pid = tok.encode(p, add_special_tokens=True).ids
        o = model(torch.tensor([pid]), output_router_logits=fam not in ("phi3", "gemma2"))
        res["prompts"].append({"ids": pid, "logits": o.logits[0].float().numpy().tolist()})
        for rl in (getattr(o, "router_logits", None) or ()):
            rl = rl[0] if isinstance(rl, tuple) else rl
            top = torch.sort(rl.float(), dim=-1, descending=True).values
            margins.append(float((top[:, 1] - top[:, 2]).min()))
res["router_margin"] = min(margins) if margins else None
print(json.dumps(res))
'''

HF_LOGITS = r'''
import json, sys
import torch
from transformers import AutoModelForCausalLM, Mxfp4Config
d, prompts, mxfp4 = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "mxfp4"
model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                             **({"quantization_config": Mxfp4Config(dequantize=True)} if mxfp4 else {}))
model.eval()
logits, margins = [], []
with torch.no_grad():
    for ids in prompts:
        o = model(torch.tensor([ids]), output_router_logits=mxfp4)
        logits.append(o.logits[0].float().numpy().tolist())
        for rl in (o.router_logits if mxfp4 else ()):
            top = torch.sort((rl[0] if isinstance(rl, tuple) else rl).float(), dim=-1, descending=True).values
            margins.append(float((top[:, 1] - top[:, 2]).min()))
print(json.dumps({"logits": logits, "router_margin": min(margins) if margins else None}))
'''

LLAMA_CPP = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
path, prompts = sys.argv[1], json.loads(sys.argv[2])
m = Llama(path, n_ctx=256, logits_all=True, verbose=False, n_threads=2)
out = []
for ids in prompts:
    m.reset(); m.eval(ids)
    out.append(np.array(m.scores[:len(ids)], dtype=np.float32).tolist())
print(json.dumps(out))
"""

CORPUS = ["The quick brown fox jumps over the lazy dog.", "def add(a, b):\n    return a + b",
          "Hello world, hello there! I'll be there in 3 minutes.", "numbers 1234567 and 3.14",
          "the cat sat on the mat and the dog sat on the log", "Once upon a time there was a little model."] * 4


def make(family: str, hfpy: str, refpy: str, seed: int) -> dict:
    sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tests"))
    import numpy as np
    from llmbook.hf import convert
    from test_hf import STRINGS
    d = OUT / family
    for seed in range(seed, seed + 40):              # MoE: the first seed whose routing has no near-tie
        r = subprocess.run([hfpy, "-c", HF_SIDE, family, str(d), str(seed), json.dumps(STRINGS), json.dumps(PROMPTS),
                            json.dumps(CORPUS)], capture_output=True, text=True)
        if r.returncode: sys.exit(f"transformers failed on {family}:\n{r.stderr[-4000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if res["router_margin"] is None or res["router_margin"] >= MIN_MARGIN: break
        print(f"{family}: seed {seed} has a router margin of {res['router_margin']:.4f}; next seed", flush=True)
    if family.endswith("_mxfp4"):
        to_mxfp4(d)
        r = subprocess.run([hfpy, "-c", HF_LOGITS, str(d), json.dumps([p["ids"] for p in res["prompts"]]), "mxfp4"],
                           capture_output=True, text=True)
        if r.returncode: sys.exit(f"transformers failed on the MXFP4 checkpoint:\n{r.stderr[-4000:]}")
        mx = json.loads(r.stdout.strip().splitlines()[-1])
        for p, logits in zip(res["prompts"], mx["logits"]): p["logits"] = logits
        res["router_margin"] = mx["router_margin"]          # the MXFP4 model's own routing
        if res["router_margin"] < MIN_MARGIN: sys.exit(f"{family}: the MXFP4 model's router margin is {res['router_margin']:.4f}")
    with tempfile.TemporaryDirectory() as tmp:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gguf = convert(d, Path(tmp) / f"{family}.gguf", "F16").path
        r = subprocess.run([refpy, "-c", LLAMA_CPP, str(gguf), json.dumps([p["ids"] for p in res["prompts"]])],
                           capture_output=True, text=True)
        if r.returncode: sys.exit(f"llama.cpp failed on {family}:\n{r.stderr[-3000:]}")
        lcpp = json.loads(r.stdout.strip().splitlines()[-1])
    arrays = {}
    for i, (p, l) in enumerate(zip(res["prompts"], lcpp)):
        arrays[f"ids_{i}"] = np.array(p["ids"], np.int32)
        arrays[f"hf_{i}"] = np.array(p["logits"], np.float16)      # float16: 3 significant digits are plenty
        arrays[f"lcpp_{i}"] = np.array(l, np.float16)
    np.savez_compressed(d / "logits.npz", **arrays)
    expected = {"seed": seed, "router_margin": res["router_margin"], "tokenizer_ids": res["tokenizer_ids"], "note": CHKTXT_NOTE}
    if family == "phi3": expected["longrope_config"] = longrope_variant(d, hfpy, refpy, res["prompts"][0]["ids"])
    (d / "expected.json").write_text(json.dumps(expected) + "\n")
    return res


# LongRoPE with an original context of 16 tokens: the prompt is longer, so transformers, llama.cpp (n_ctx 256) and
# llmbook all use the long factors, and the attention factor is sqrt(1 + ln(4096 / 16) / ln(16))
LONGROPE = {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 1.0,
                                "long_factor": [1.0, 1.5, 3.0, 8.0], "short_factor": [1.0, 1.1, 1.2, 1.3],
                                "original_max_position_embeddings": 16},
            "original_max_position_embeddings": 16, "max_position_embeddings": 4096}

def longrope_variant(d: Path, hfpy: str, refpy: str, ids: list) -> dict:
    "The phi3 checkpoint with LONGROPE in its config.json: transformers' and llama.cpp's logits in logits_longrope.npz."
    import numpy as np, shutil, warnings
    from llmbook.hf import convert
    with tempfile.TemporaryDirectory() as tmp:
        v = Path(tmp) / "phi3"
        shutil.copytree(d, v)
        cfg = json.loads((v / "config.json").read_text()); cfg.update(LONGROPE)
        (v / "config.json").write_text(json.dumps(cfg))
        r = subprocess.run([hfpy, "-c", HF_LOGITS, str(v), json.dumps([ids]), "-"], capture_output=True, text=True)
        if r.returncode: sys.exit(f"transformers failed on LongRoPE:\n{r.stderr[-3000:]}")
        hf = json.loads(r.stdout.strip().splitlines()[-1])["logits"][0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gguf = convert(v, Path(tmp) / "phi3-longrope.gguf", "F16").path
        r = subprocess.run([refpy, "-c", LLAMA_CPP, str(gguf), json.dumps([ids])], capture_output=True, text=True)
        if r.returncode: sys.exit(f"llama.cpp failed on LongRoPE:\n{r.stderr[-3000:]}")
        lcpp = json.loads(r.stdout.strip().splitlines()[-1])[0]
    np.savez_compressed(d / "logits_longrope.npz", ids_0=np.array(ids, np.int32), hf_0=np.array(hf, np.float16),
                        lcpp_0=np.array(lcpp, np.float16))
    return LONGROPE


def to_mxfp4(d: Path):
    "gpt-oss as OpenAI releases it: the experts' matrices as MXFP4 `*_blocks` / `*_scales` (U8), llmbook's rounding."
    import numpy as np
    from llmbook.hf import read_safetensors
    from llmbook.moe import quantize_mxfp4
    from llmbook.quants import dequantize
    entries = read_safetensors(d / "model.safetensors")
    tensors = {}
    for name, e in entries.items():
        t = e.tensor()
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            w = np.ascontiguousarray(dequantize(t).reshape(t.shape).swapaxes(-1, -2))     # (n_expert, out, in)
            q = quantize_mxfp4(w).data.reshape(*w.shape[:-1], w.shape[-1] // 32, 17)
            qs = q[..., 1:]
            vals = np.concatenate([qs & 0x0F, qs >> 4], -1)                                # weights j, j + 16 -> 0..31
            blocks = (vals[..., 0::2] | (vals[..., 1::2] << 4)).astype(np.uint8)           # OpenAI: 2j low, 2j + 1 high
            tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, np.ascontiguousarray(q[..., 0])
        else:   # copies: the file is about to be overwritten, and these are views of its memory map
            tensors[name] = (np.array(t.data).view(np.uint16).reshape(t.shape), "BF16") if hasattr(t, "type") else np.array(t)
    del entries
    write_raw_safetensors(d / "model.safetensors", tensors)
    cfg = json.loads((d / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                                     "model.embed_tokens", "lm_head"]}
    (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def write_raw_safetensors(path: Path, tensors: dict):
    "A safetensors file of U8 arrays and (bits, 'BF16') pairs, as the released gpt-oss checkpoints have."
    import numpy as np, struct
    header, chunks, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        a, dtype = (t[0], t[1]) if isinstance(t, tuple) else (t, None)
        dtype = dtype or {np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32"}[a.dtype]
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + raw.size]}
        chunks.append(raw); off += raw.size
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-(len(head) + 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head))); f.write(head)
        for c in chunks: f.write(c.tobytes())


MIN_MARGIN = 0.05      # router logits: the k-th best expert at least this far above the next, for every token and layer
SEEDS = {"phi3": 0, "gemma2": 0, "mixtral": 27, "qwen3moe": 1, "olmoe": 2, "gptoss": 24, "gptoss_mxfp4": 24}   # the search's results

def main():
    hfpy, refpy = os.environ.get("HFPY"), os.environ.get("REFPY")
    if not hfpy or not refpy: sys.exit("set HFPY (a Python with transformers, torch, tokenizers) and REFPY (llama-cpp-python)")
    for fam in sys.argv[1:] or FAMILIES:
        res = make(fam, hfpy, refpy, SEEDS[fam])
        size = sum(p.stat().st_size for p in (OUT / fam).iterdir())
        print(f"{fam}: seed {json.loads((OUT / fam / 'expected.json').read_text())['seed']}, router margin {res['router_margin']}, {size:,} bytes")

if __name__ == "__main__":
    main()
