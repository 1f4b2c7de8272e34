"""Draw the book's map: the path of a token through the engine, as SVG, with the default model's real shapes.

    python tools/draw_map.py            # nbs/images/map.svg and one nbs/images/map_<stem>.svg per chapter
    python tools/draw_map.py --out DIR

`map.svg` (the index) colours every part by what it is and tags it with the chapter that builds it;
`map_<stem>.svg` greys the map and highlights the part that chapter builds. Every number on the map is read
from SmolLM2-135M-Instruct (`llmbook.load()`): its config, its file, its tokenizer and one forward pass.
The SVG is written by hand (boxes, arrows, text), so it needs no plotting library and no network.
"""
import argparse, html, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
W, H = 1012, 850
DX = 10                                                # everything drawn is shifted right by DX
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

# Colours by kind of part: (fill, stroke, text).
KIND = {
    "file":  ("#dbeafe", "#2563eb", "#1e3a8a"),   # the file and its tensors
    "tok":   ("#dcfce7", "#16a34a", "#14532d"),   # tokenizer, text, ids
    "model": ("#ede9fe", "#7c3aed", "#3b0764"),   # embedding, norms, RoPE, attention, activations
    "mat":   ("#fef3c7", "#d97706", "#78350f"),   # matrix products on quantized weights
    "cache": ("#ccfbf1", "#0d9488", "#134e4a"),   # the KV cache
    "samp":  ("#ffe4e6", "#e11d48", "#881337"),   # logits, sampler, the token
}
GREY = ("#f3f4f6", "#c7cbd1", "#9ca3af")

# What each chapter builds: the parts (box names below) it highlights, and its caption.
FORWARD = ["file", "tensors", "floats", "weights", "embed", "block", "zoom", "resid", "norm1", "wq", "wk", "wv", "rope",
           "cache", "attn", "wo", "add1", "norm2", "gate", "up", "act", "down", "add2", "final_norm", "out_proj", "logits"]
CHAPTERS = {
    "1_01_tensors":   ("tensors: the weights as arrays (QTensor views)", ["tensors", "weights"]),
    "1_02_gguf":      ("the GGUF file: metadata and tensors", ["file"]),
    "1_03_quants":    ("quantized blocks to floats", ["floats"]),
    "1_04_kernels":   ("the matrix products on quantized weights", ["wq", "wk", "wv", "wo", "gate", "up", "down", "out_proj"]),
    "2_11_runtime":  ("the threads every fast kernel runs on", ["wq", "wk", "wv", "wo", "gate", "up", "down", "out_proj", "attn"]),
    "2_12_packed":   ("the same matrix products, packed and fast, for every type", ["wq", "wk", "wv", "wo", "gate", "up", "down", "out_proj"]),
    "2_13_int8":     ("the same matrix products with 8-bit integer dot products", ["wq", "wk", "wv", "wo", "gate", "up", "down", "out_proj"]),
    "2_13_floats":   ("the same matrix products on F16, BF16 and F32 weights, widened in registers", ["wq", "wk", "wv", "wo", "gate", "up", "down", "out_proj"]),
    "1_05_attention": ("RMSNorm, RoPE, attention, the residual and the gated FFN",
                     ["norm1", "norm2", "final_norm", "rope", "attn", "act", "add1", "add2", "resid"]),
    "2_14_attention_kernels": ("the same parts made fast: fused norms, attention in tiles, gated activations",
                     ["norm1", "norm2", "final_norm", "attn", "act", "add1", "add2", "resid"]),
    "1_06_kvcache":   ("the KV cache", ["cache"]),
    "1_07_model":     ("the whole forward pass: from the file to the logits", FORWARD),
    "2_15_engine":   ("the fast engine: the same forward pass on the kernels", FORWARD),
    "2_16_one_answer": ("one answer: the same logits however the tokens are batched", FORWARD),
    "2_16_speculative": ("speculative decoding: the sampled token and guesses after it in one pass, checked by the sampler",
                     ["ids", "block", "logits", "sampler", "next", "loop"]),
    "1_08_tokenizer": ("the tokenizer: text to token ids, and back", ["text", "encode", "ids", "decode"]),
    "1_09_sampling":  ("the sampler: from the logits to one token", ["logits", "sampler", "next"]),
    "4_24_grammar":  ("a grammar's token mask on the logits, before the sampler", ["logits", "sampler"]),
    "1_10_generate":  ("the generation loop: the whole cycle, back to the input",
                     ["text", "encode", "ids", "embed", "block", "final_norm", "out_proj", "logits", "sampler", "next",
                      "decode", "loop"]),
    "1_00_one_page": ("the whole engine on one page: every part, in numpy",
                     ["text", "encode", "ids", "floats", "weights"] + FORWARD[4:] + ["sampler", "next", "decode", "loop"]),
    "4_21_quantize":  ("quantizing the file: a smaller model", ["file", "tensors", "floats", "quantize"]),
    "4_25_demo":      ("the demo: an app around generation", ["frame", "text", "decode", "sampler", "loop"]),
    "4_26_cli":       ("the llmbook command", ["frame", "text", "decode", "file"]),
    "4_27_toolcalls": ("tool calls: the tools in the prompt, a grammar on the sampler, the calls cut out of the text",
                     ["text", "encode", "logits", "sampler", "decode"]),
    "4_27_scheduler": ("the scheduler: slots with their own KV caches, one forward pass for every slot", ["cache", "block", "loop"]),
    "4_27_serve":     ("the server: the whole loop behind OpenAI's HTTP API", ["frame", "text", "decode", "sampler", "loop"]),
    "3_17_families":     ("every family as a diff of the block: RoPE, norms, soft caps, fused weights",
                     ["weights", "norm1", "norm2", "wq", "wk", "wv", "rope", "attn", "gate", "up", "logits"]),
    "4_22_hf":        ("Hugging Face checkpoints become the GGUF file", ["file", "tensors"]),
    "4_23_load":      ("llmbook.load: a name becomes the GGUF file and a model on the fast engine", ["file", "tensors", "weights"]),
    "3_18_tokenizers":   ("every tokenizer: the pre-tokenizer table and per-model rules", ["text", "encode", "ids", "decode"]),
    "3_18_chat":      ("chat templates: a conversation laid out as the model reads it, before it is encoded", ["text", "encode"]),
    "3_19_moe":       ("mixture of experts: a router picks a few of many FFNs per token", ["gate", "up", "act", "down"]),
    "3_20_untrusted":    ("files you do not trust: the reader's checks, broken on purpose", ["file"]),
}
FRAME_LABEL = {"4_25_demo": "25 · an app around the loop: a prompt box, the sampler's settings, the text as it streams out",
               "4_26_cli": "26 · llmbook generate | chat | tokenize | inspect | bench | quantize | perplexity",
               "4_27_serve": "27 · llmbook serve: HTTP requests -> a slot's session -> the loop -> server-sent events"}

def facts():
    "The numbers the map shows, read from the default model."
    import numpy as np
    import llmbook
    m = llmbook.load()
    c, f, tok = m.config, m.gguf, m.tokenizer
    prompt = "The three primary colors are"
    ids = tok.encode(prompt, add_special=True)
    nxt = int(np.argmax(m.logits(ids)[-1]))
    t = f.tensors
    return dict(prompt=prompt, ids=ids, next=nxt, piece=tok.decode([nxt]), n=len(ids), vocab=c.n_vocab, d=c.n_embd,
                layers=c.n_layers, heads=c.n_heads, kv_heads=c.n_kv_heads, hd=c.head_dim, ff=c.n_ff,
                scale=1 / c.attn_scale, mb=f.file_size / 1e6, n_tensors=len(t), tied="output.weight" not in t,
                embd_type=t["token_embd.weight"].type, w_type=t["blk.0.attn_q.weight"].type,
                q_out=c.n_heads * c.head_dim, kv_out=c.n_kv_heads * c.head_dim)

class Map:
    "An SVG drawn part by part; each part belongs to a kind (its colour) and is highlighted or greyed."
    def __init__(self, lit=None):
        self.lit, self.back, self.front = lit, [], []    # lit: None = the full map (every part coloured)

    def colours(self, part, kind):
        if self.lit is None or part in self.lit: return KIND[kind]
        return GREY

    def on(self, part): return self.lit is None or part in self.lit

    def text(self, x, y, s, size=14, weight="normal", fill="#374151", anchor="middle", style="", rotate=None, layer=None):
        tr = f' transform="rotate({rotate} {x} {y})"' if rotate is not None else ""
        st = f' font-style="{style}"' if style else ""
        (layer if layer is not None else self.front).append(
            f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" fill="{fill}" text-anchor="{anchor}"{st}{tr}>'
            f'{html.escape(s)}</text>')

    def box(self, part, kind, x, y, w, h, title, sub=(), badge=None, title_style="", size=15.5):
        fill, stroke, ink = self.colours(part, kind)
        lit = self.lit is not None and part in self.lit
        self.front.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="7" fill="{fill}" stroke="{stroke}" '
                          f'stroke-width="{3 if lit else 1.6}"/>')
        sub = [sub] if isinstance(sub, str) else list(sub)
        lines = 1 + len(sub)
        top = y + h / 2 - (lines - 1) * 9 + 5
        self.text(x + w / 2, top, title, size, "bold", ink, style=title_style)
        for i, s in enumerate(sub): self.text(x + w / 2, top + 18 * (i + 1), s, 13.5, fill=ink)
        if badge:
            bf = stroke if self.on(part) else "#d1d5db"
            self.front.append(f'<rect x="{x - 8}" y="{y - 9}" width="32" height="18" rx="9" fill="{bf}"/>')
            self.text(x + 8, y + 4.5, badge, 12, "bold", "#ffffff")
        return (x, y, w, h)

    def line(self, part, pts, arrow=True, dash=False, width=None, kind=None):
        on = self.on(part)
        col = (KIND[kind][1] if kind and on else "#4b5563") if on else "#c7cbd1"
        wdt = width or (2.4 if (self.lit is not None and part in self.lit) else 1.6)
        d = " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y) in enumerate(pts))
        mk = f' marker-end="url(#{"ah" if on else "ahg"})"' if arrow else ""
        ds = ' stroke-dasharray="6 4"' if dash else ""
        self.front.insert(0, f'<path d="{d}" fill="none" stroke="{col}" stroke-width="{wdt}"{ds}{mk}/>')

    def label(self, part, x, y, s, anchor="start", size=13, rotate=None):
        self.text(x, y, s, size, fill="#4b5563" if self.on(part) else "#b6bbc3", anchor=anchor, rotate=rotate,
                  style="italic")

    def svg(self, title):
        defs = ('<defs>'
                '<marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" markerHeight="10" markerUnits="userSpaceOnUse" orient="auto">'
                '<path d="M0,0 L10,5 L0,10 z" fill="#4b5563"/></marker>'
                '<marker id="ahg" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" markerHeight="10" markerUnits="userSpaceOnUse" orient="auto">'
                '<path d="M0,0 L10,5 L0,10 z" fill="#c7cbd1"/></marker>'
                '<marker id="ahr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="16" markerHeight="16" '
                'markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#a78bfa"/></marker></defs>')
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
                f'font-family="{FONT}" role="img">\n<title>{html.escape(title)}</title>\n{defs}\n'
                f'<rect width="{W}" height="{H}" fill="#ffffff"/>\n<g transform="translate({DX},0)">\n'
                + "\n".join(self.back) + "\n" + "\n".join(self.front) + "\n</g>\n</svg>\n")

def draw(F, stem=None):
    "The map, with `stem`'s part highlighted (None: the full map)."
    lit = set(CHAPTERS[stem][1]) if stem else None
    M = Map(lit)
    n, d, V = F["n"], F["d"], F["vocab"]
    if stem:
        num = stem.split("_")[1] if stem.count("_") >= 2 and stem.split("_")[1].isdigit() else None   # 2_15_engine: chapter 15
        title = f"Chapter {num} · {CHAPTERS[stem][0]}" if num else CHAPTERS[stem][0][:1].upper() + CHAPTERS[stem][0][1:]
    else:
        title = "The path of a token through SmolLM2-135M-Instruct"
    M.text(20, 30, title, 20, "bold", "#111827", anchor="start")

    # The trunk: text in, tokens, the model, logits, the sampler, text out (top to bottom).
    X, TW = 40, 240
    cx = X + TW / 2
    M.box("text", "tok", X, 50, TW, 44, f"“{F['prompt']}”", title_style="italic")
    M.box("encode", "tok", X, 116, TW, 44, "tokenizer: encode", "text → token ids (BPE)", "08")
    M.box("ids", "tok", X, 182, TW, 44, "token ids", " ".join(map(str, F["ids"])))
    M.box("embed", "model", X, 248, TW, 50, "embedding", f"a row of {V} × {d} per id", "07")
    M.box("block", "model", X, 322, TW, 64, f"transformer block × {F['layers']}", f"{n} × {d} in, {n} × {d} out", "07")
    M.box("final_norm", "model", X, 410, TW, 44, "final RMSNorm", f"{n} × {d}", "05")
    M.box("out_proj", "mat", X, 474, TW, 60, "output projection",
          [f"{d} → {V}"] + (["the embedding's matrix again"] if F["tied"] else []), "04")
    M.box("logits", "samp", X, 552, TW, 44, "logits", f"{V} scores per position")
    M.box("sampler", "samp", X, 616, TW, 50, "sampler", "temperature, top-k, top-p, min-p", "09")
    M.box("next", "samp", X, 688, TW, 44, "next token id", f"{F['next']}")
    M.box("decode", "tok", X, 754, TW, 44, "tokenizer: decode", f"{F['next']} → “{F['piece']}”", "08")
    for a, b, part, lab in [(94, 116, "encode", None), (160, 182, "ids", None), (226, 248, "embed", None),
                            (298, 322, "block", f"x: {n} × {d}, the hidden state"), (386, 410, "final_norm", None),
                            (454, 474, "out_proj", None), (534, 552, "logits", f"{n} × {V}"),
                            (596, 616, "sampler", "the last position's row"), (666, 688, "next", None),
                            (732, 754, "decode", None)]:
        M.line(part, [(cx, a), (cx, b)])
        if lab: M.label(part, cx + 8, (a + b) / 2 + 5, lab)
    # The generation loop: the new id goes back in, after the ids so far.
    M.line("loop", [(X, 710), (20, 710), (20, 204), (X, 204)], width=2.6 if lit and "loop" in lit else None)
    M.label("loop", 12, 457, "generation loop: the new id is appended, and the model runs again", anchor="middle",
            rotate=-90)

    # The file, its tensors, the blocks they hold (top right), and the weights going into the model.
    M.box("file", "file", 330, 50, 170, 60, "GGUF file", f"{F['mb']:.0f} MB · {F['n_tensors']} tensors", "02")
    M.box("tensors", "file", 522, 50, 170, 60, "tensors (QTensor)", "views into the mmap", "01")
    M.box("floats", "file", 714, 50, 150, 60, "blocks → floats", f"{F['w_type']}, {F['embd_type']}, …", "03")
    M.box("quantize", "file", 884, 50, 100, 60, "quantize", "a new file", "21")
    M.line("tensors", [(500, 80), (522, 80)])
    M.line("floats", [(692, 80), (714, 80)])
    M.line("quantize", [(864, 80), (884, 80)])
    M.line("weights", [(790, 110), (790, 150)])
    M.label("weights", 798, 136, "weights of every layer")
    M.line("weights", [(790, 128), (300, 128), (300, 273), (282, 273)], dash=True)

    # Inside one block (the panel on the right): the residual stream, the attention branch, the FFN branch.
    PX, PY, PW, PH = 330, 150, 654, 600
    zf = "#ede9fe" if M.on("zoom") or M.on("block") else "#f5f5f7"
    M.back.append(f'<polygon points="{X + TW},{322} {PX},{PY + 50} {PX},{PY + PH} {X + TW},{386}" fill="{zf}" opacity="0.7"/>')
    M.back.append(f'<rect x="{PX}" y="{PY}" width="{PW}" height="{PH}" rx="10" fill="#fbfaff" '
                  f'stroke="{"#7c3aed" if M.on("block") else "#d1d5db"}" stroke-width="1.6"/>')
    M.text(PX + 18, PY + 24, f"inside one transformer block ({F['layers']} of them, each with its own weights)", 15,
           "bold", "#3b0764" if M.on("block") else "#9ca3af", anchor="start")
    RX = 362                                               # the residual stream
    rcol = KIND["model"][1] if M.on("resid") else "#d1d5db"
    M.back.append(f'<path d="M{RX},{PY + 40} L{RX},{PY + PH - 14}" stroke="{rcol}" stroke-width="5" opacity="0.55" '
                  f'marker-end="url(#ahr)"/>')
    M.label("resid", RX - 10, 600, f"residual stream: x, {n} × {d}", anchor="middle", rotate=-90)
    for y, part in ((466, "add1"), (695, "add2")):
        fill, stroke, ink = M.colours(part, "model")
        M.front.append(f'<circle cx="{RX}" cy="{y}" r="11" fill="{fill}" stroke="{stroke}" stroke-width="2"/>')
        M.text(RX, y + 6, "+", 18, "bold", ink)
    # attention
    M.line("norm1", [(RX, 215), (400, 215)])
    M.box("norm1", "model", 400, 197, 120, 36, "RMSNorm", badge="05")
    M.line("wq", [(467, 233), (467, 255)]); M.line("wk", [(467, 242), (612, 242), (612, 255)])
    M.line("wv", [(612, 242), (757, 242), (757, 255)])
    for part, x0, out, nh in (("wq", 400, F["q_out"], F["heads"]), ("wk", 545, F["kv_out"], F["kv_heads"]),
                              ("wv", 690, F["kv_out"], F["kv_heads"])):
        M.box(part, "mat", x0, 255, 135, 50, f"{part[0].upper()}{part[1]}: {d} → {out}", f"{nh} heads × {F['hd']}",
              "04", size=14.5)
    M.line("rope", [(467, 305), (467, 322)]); M.line("rope", [(612, 305), (612, 322)])
    M.box("rope", "model", 400, 322, 280, 34, "RoPE: q, k turned by position", badge="05", size=14.5)
    M.line("cache", [(680, 339), (840, 339)]); M.label("cache", 760, 333, "k", anchor="middle")
    M.line("cache", [(825, 280), (840, 280)])
    M.box("cache", "cache", 840, 255, 132, 101, "KV cache", ["k and v of every", "position so far,",
          f"{F['kv_heads']} heads × {F['hd']}"], "06")
    M.line("attn", [(540, 356), (540, 378)]); M.label("attn", 548, 372, "q")
    M.line("attn", [(906, 356), (906, 378)])
    M.box("attn", "model", 400, 378, 572, 50, "attention: softmax(q·kᵀ / {:g} + causal mask) · v".format(F["scale"]),
          f"{F['heads']} query heads share {F['kv_heads']} key/value heads (GQA)", "05")
    M.line("wo", [(467, 428), (467, 446)])
    M.box("wo", "mat", 400, 446, 135, 40, f"Wo: {d} → {d}", badge="04", size=14.5)
    M.line("add1", [(400, 466), (RX + 11, 466)])
    M.label("add1", 550, 471, "x ← x + attention: the residual")
    # FFN
    M.line("norm2", [(RX, 524), (400, 524)])
    M.box("norm2", "model", 400, 506, 120, 36, "RMSNorm", badge="05")
    M.line("gate", [(467, 542), (467, 560)]); M.line("up", [(467, 551), (627, 551), (627, 560)])
    M.box("gate", "mat", 400, 560, 150, 42, f"gate: {d} → {F['ff']}", badge="04", size=14.5)
    M.box("up", "mat", 560, 560, 150, 42, f"up: {d} → {F['ff']}", badge="04", size=14.5)
    M.line("act", [(475, 602), (475, 620)]); M.line("act", [(635, 602), (635, 620)])
    M.box("act", "model", 400, 620, 310, 36, "SiLU(gate) × up: the gated FFN", badge="05", size=14.5)
    M.line("down", [(475, 656), (475, 674)])
    M.box("down", "mat", 400, 674, 150, 42, f"down: {F['ff']} → {d}", badge="04", size=14.5)
    M.line("add2", [(400, 695), (RX + 11, 695)])
    M.label("add2", 562, 700, "x ← x + FFN")
    for i, s in enumerate(["Each branch reads a normalized", "copy of x and adds its result", "back to x: x flows down the",
                           "stream, changed a little by", "every branch."]):
        M.label("resid", 735, 572 + 18 * i, s)
    M.label("resid", RX + 12, PY + PH - 10, "x, to the next block")

    if lit and "frame" in lit:
        M.back.insert(0, f'<rect x="{4 - DX}" y="40" width="{W - 8}" height="{H - 66}" rx="12" fill="#fffdf5" '
                         f'stroke="#d97706" stroke-width="2.5" stroke-dasharray="10 6"/>')
        M.text(W / 2 - DX, H - 9, FRAME_LABEL[stem], 14, "bold", "#92400e")
    elif not stem:
        M.text(W / 2 - DX, H - 8, f"Tags: the chapter that builds each part. Shapes and numbers: SmolLM2-135M-Instruct "
               f"({F['w_type']}), {n} prompt tokens.", 13, fill="#6b7280")
    return M.svg(title)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "nbs" / "images"))
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    F = facts()
    (out / "map.svg").write_text(draw(F), encoding="utf-8")
    for stem in CHAPTERS: (out / f"map_{stem}.svg").write_text(draw(F, stem), encoding="utf-8")
    print(f"wrote map.svg and {len(CHAPTERS)} chapter maps to {out}", file=sys.stderr)

if __name__ == "__main__":
    main()
